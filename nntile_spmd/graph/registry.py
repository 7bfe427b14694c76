"""Graph layer: the op registry. One OpSpec per op holds its rules.

An entry states the attribute schema, the shape/dtype rule, the axis map (which
operand dimensions are the same axis; the plan tiles and lowers every op from it
alone), the kernel name, the FLOP count and the backward rule that autodiff calls.
The entries are written by the op families (graph/families.py lists them), each next
to its builders and backward rules, and enter REGISTRY only when graph/__init__.py
calls families.register_all: importing a family module registers nothing. The kernel
itself is a row of each backend's table in nntile_kernels, under the entry's kernel
name. No numba, cupy or mpi4py here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from collections.abc import Callable

REQUIRED = object()  # marks an attribute without a default


def describe_all(tensors) -> str:
    return ", ".join(t.describe() for t in tensors)


def op_error(op: str, message: str, tensors=(), error=ValueError):
    """Build the error raised when an op is added: names the op and its tensors."""
    listed = f" ({describe_all(tensors)})" if tensors else ""
    return error(f"{op}: {message}{listed}")


def labels(prefix: str, count: int) -> tuple:
    """Axis labels prefix0, prefix1, ... for `count` dimensions."""
    return tuple(f"{prefix}{i}" for i in range(count))


def never(attrs) -> bool:
    return False


def always(attrs) -> bool:
    return True


@dataclass(frozen=True, kw_only=True)
class OpSpec:
    """The rules of one op type, built with keywords (OpSpec(name=..., kernel=..., ...)).

    infer(op, attrs, inputs) -> [(shape, dtype), ...] expected for each output,
    or None where an output is only given (fill, clear); raises ValueError /
    TypeError naming op and tensors.
    axes(attrs, in_shapes, out_shapes) -> one label tuple per kernel array
    (inputs, then outputs). Labels shared between arrays are the same axis;
    labels absent from every output are summed tile by tile (the op's kernel must
    then take `beta`, named by beta_attr); labels in whole(attrs, axes) must
    stay in one tile (softmax's axis).
    combine names the kernel that merges two partial results of such a sum when
    they were computed on different ranks: called as combine(child, parent, parent,
    alpha=1, beta) like "add"; an op whose partials are not added (logsumexp's are
    merged by logaddexp) names its own; None forbids partial results (the owner runs
    every step: copy_intersection's steps overwrite, they do not add up).
    windows(attrs, in_shapes, out_shapes) -> {label: (source_label, window)} restricts a
    summed label to the tiles meeting window(start, stop), the element range it reads
    under the source label's tile [start, stop): a convolution's input rows under an
    output tile (its halo), not the whole axis.
    backward(op, ctx) adds the ops that accumulate the gradients of op's inputs from
    those of its outputs (graph/autodiff.py's GradContext), or raises naming why it
    cannot; None where no gradient is built (grad then raises if one is needed).
    differentiable=False marks the ops that gradients never pass by design (optimizer
    steps, backward kernels): they take no backward rule.
    in_place lists the inputs that may also be given as the output: the op reads each
    tile of that input only to write the same tile of the output, and its kernel
    works on the aliased buffer (the *_inplace forms, mask_causal). Any other output
    that is also an input is refused (check_aliasing).
    """

    name: str
    kernel: str
    num_inputs: int
    num_outputs: int
    infer: Callable
    axes: Callable
    attrs: dict = field(default_factory=dict)
    reads_output: Callable = never          # does the kernel read the old output?
    beta_attr: str | None = None
    combine: str | None = "add"              # kernel merging partial results across ranks
    whole: Callable = lambda attrs, axes: frozenset()
    flops: Callable = lambda attrs, in_shapes, out_shapes: 0
    tile_params: Callable | None = None      # (attrs, tile_offsets) -> extra kernel params
    # (attrs, in_shapes, out_shapes) of the whole tensors -> extra kernel params shared by
    # every tile (cross_entropy_lse's class count; embedding's vocab_size, as a vocab tile
    # alone cannot tell an id outside the vocabulary): shapes are concrete once planned
    shape_params: Callable | None = None
    # (input dtypes, output dtypes) -> extra kernel params (gemm's compute_type for the
    # fp32_fast_* dtypes, whose tiles are plain fp32 so the kernel cannot tell)
    dtype_params: Callable | None = None
    kernel_attrs: tuple | None = None        # attrs passed to the kernel (default: all)
    # (attrs, tile_offsets, tile_shapes, whole_shapes) -> False for a step that leaves its
    # output tile as it is (a box copy whose input tile misses the output tile): not lowered
    step_needed: Callable | None = None
    view: str | None = None    # plan/views.py's rule for when the output may alias the input
    windows: Callable | None = None          # summed labels read only near the source tile
    backward: Callable | None = None
    differentiable: bool = True
    in_place: tuple = ()                     # input indices that may be the output itself

    def __post_init__(self):
        if self.backward is not None and not self.differentiable:
            raise ValueError(f"{self.name}: a backward rule on an op marked "
                             "differentiable=False")

    def normalize_attrs(self, given: dict) -> dict:
        """Fill defaults and reject unknown or missing attributes."""
        unknown = set(given) - set(self.attrs)
        if unknown:
            raise TypeError(f"{self.name}: unknown attribute(s) {sorted(unknown)}; "
                            f"expected {sorted(self.attrs)}")
        result = {}
        for key, default in self.attrs.items():
            value = given.get(key, default)
            if value is REQUIRED:
                raise TypeError(f"{self.name}: missing attribute {key!r}")
            result[key] = value
        return result

    def kernel_params(self, attrs: dict) -> dict:
        """The attributes handed to the kernel as keyword params."""
        names = self.attrs if self.kernel_attrs is None else self.kernel_attrs
        return {key: attrs[key] for key in names}


def check_aliasing(spec: OpSpec, inputs, outputs) -> None:
    """Refuse an output that is also an input the op does not update in place by design:
    gemm(a, b, a) reads tiles of `a` after it overwrote them, and a BLAS call whose
    output is one of its operands is undefined, so the result is wrong without an error."""
    for output in outputs:
        for index, tensor in enumerate(inputs):
            if tensor is output and index not in spec.in_place:
                allowed = (f"; only input(s) {list(spec.in_place)} may be updated in place"
                           if spec.in_place else "")
                raise op_error(spec.name, f"output {output.name} is also input {index} "
                               f"(the op would read tiles of {output.name} it has already "
                               f"overwritten){allowed}; write the result into a new tensor "
                               "and copy it back with ops.copy", (*inputs, *outputs))


REGISTRY: dict[str, OpSpec] = {}   # filled by graph/families.py, once, at import


def add_entries(registry: dict, entries) -> None:
    """Add one family's entries to `registry` (op names are unique across families)."""
    for spec in entries:
        assert spec.name not in registry, f"op {spec.name} registered twice"
        registry[spec.name] = spec


def get_spec(op_type: str) -> OpSpec:
    """The spec of a registered op type."""
    try:
        return REGISTRY[op_type]
    except KeyError:
        raise ValueError(f"unknown op type {op_type!r}") from None
