"""Graph layer: the NNTile 2.0 plan's graph-building names (seed 003 §4.1.1, §4.1.4) on
LogicalGraph: input/parameter/constant from a TensorSpec, output under a name, every
`nt.ops` builder as a method whose output name may be left out, the seed's meaning of
matmul, add, scaled_dot_product_attention, layer_norm and transpose, and the analysis
queries.

Thin: each method declares tensors with LogicalGraph.tensor or calls the `nt.ops`
builder; the engine below sees ordinary tensors and ops. docs/seed_api.md maps the names.
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass

from . import ops
from .registry import op_error
from .tensor import TensorNode, check_shape

# the parameter through which an nt.ops builder names its new output
NAME_PARAMETERS = ("name", "c_or_name")
# nt.ops helpers that are not op builders
NOT_BUILDERS = ("apply", "owner_graph")


@dataclass(frozen=True)
class TensorSpec:
    """A logical tensor's shape (ints, or symbol names bound at PhysicalGraph) and dtype;
    requires_grad asks backward() for an input's gradient."""

    shape: tuple
    dtype: str = "fp32"
    requires_grad: bool = False

    def __post_init__(self):
        object.__setattr__(self, "shape", check_shape(tuple(self.shape)))

    @property
    def ndim(self) -> int:
        return len(self.shape)


class SeedGraphMethods:
    """Mixed into LogicalGraph (which holds `_output_names`: output name -> tensor)."""

    # -- tensors by role ---------------------------------------------------------------
    def input(self, spec: TensorSpec, name: str) -> TensorNode:
        """An input, bound by ExecutableGraph.bind_input before each execute."""
        spec = as_spec("input", spec)
        return self.tensor(spec.shape, name, spec.dtype, requires_grad=spec.requires_grad,
                           external=True)

    def parameter(self, spec: TensorSpec, name: str) -> TensorNode:
        """A trainable weight: persistent, its gradient computed by backward()."""
        spec = as_spec("parameter", spec)
        return self.tensor(spec.shape, name, spec.dtype, requires_grad=True, persistent=True)

    def constant(self, spec: TensorSpec, name: str) -> TensorNode:
        """A fixed tensor bound once (external and persistent: role "constant")."""
        spec = as_spec("constant", spec)
        return self.tensor(spec.shape, name, spec.dtype, persistent=True, external=True)

    def output(self, tensor: TensorNode, name: str | None = None) -> TensorNode:
        """Mark `tensor` as an output, reachable as `name` (default its own name)."""
        self.check_own("output", tensor)
        name = tensor.name if name is None else name
        taken = self._output_names.get(name)
        if taken is not None and taken is not tensor or \
                (name != tensor.name and self.has_tensor(name)):
            raise ValueError(f"output: the name {name!r} is already used in graph "
                             f"{self.name!r}")
        tensor.mark_output()
        self._output_names[name] = tensor
        return tensor

    def output_names(self) -> dict:
        """{output name: tensor} of the outputs declared with output()."""
        return dict(self._output_names)

    def resolve(self, name: str) -> TensorNode:
        """The tensor called `name`, or the output declared under that name."""
        tensor = self._output_names.get(name)
        return tensor if tensor is not None else self.get_tensor(name)

    # -- the seed's meaning of four ops ---------------------------------------------------
    def matmul(self, a, b, name=None, trans_a=False, trans_b=False) -> TensorNode:
        """a's last dim contracted with b's first (x [seq, batch, in] @ W [in, out])."""
        self.check_own("matmul", a, b)
        return ops.gemm(a, b, self.fresh_name("matmul", name), trans_a=trans_a,
                        trans_b=trans_b)

    def add(self, a, b, name=None, alpha=1.0, beta=1.0) -> TensorNode:
        """alpha * a + beta * b (nt.ops.add's NNTile order is add(alpha, x, beta, y, name))."""
        self.check_own("add", a, b)
        return ops.add(alpha, a, beta, b, self.fresh_name("add", name))

    def scaled_dot_product_attention(self, q, k, v, name=None, mask=None,
                                     scale=None) -> TensorNode:
        """One head on the seed's [seq, ..., dim] tensors: softmax over the key positions of
        scale * q k^T (scale 1/sqrt(dim) by default), times v; [seq, ..., dim] out.

        nt.ops' attention takes [dim, seq, ...]: the operands are moved there and back by
        transposes (ordinary ops, so it tiles, distributes and differentiates as they do)."""
        self.check_own("scaled_dot_product_attention", q, k, v)
        for tensor in (q, k, v):
            if tensor.ndim < 2:
                raise op_error("scaled_dot_product_attention", "q, k and v must be "
                               "[seq, ..., dim] with at least 2 dims", (q, k, v))
        name = self.fresh_name("attention", name)
        heads_first = [ops.transpose(t, self.fresh_name(f"{name}_{part}T"), ndim=t.ndim - 1)
                       for part, t in zip("qkv", (q, k, v))]
        out = ops.scaled_dot_product_attention(*heads_first, self.fresh_name(f"{name}_dseq"),
                                               mask=mask, scale=scale)
        return ops.transpose(out, name, ndim=1)

    def layer_norm(self, x, gamma, beta, name=None, eps=1e-5) -> TensorNode:
        """Normalise over x's trailing dim, which gamma and beta ([dim]) match."""
        self.check_own("layer_norm", x, gamma, beta)
        if gamma.ndim != 1 or x.ndim < 1 or gamma.shape[0] != x.shape[-1]:
            raise op_error("layer_norm", f"gamma must be [{x.shape[-1] if x.ndim else '?'}], "
                           "the trailing dim of x (one normalised dim)", (x, gamma, beta))
        return ops.layer_norm(x, gamma, beta, self.fresh_name("layer_norm", name),
                              axis=x.ndim - 1, eps=eps)

    def transpose(self, x, perm=None, name=None, alpha=1.0, ndim=None) -> TensorNode:
        """The seed's transpose(x, perm): y's dim i is x's dim perm[i], any permutation
        (nt.ops.permute); or NNTile's cyclic one, transpose(x, ndim=k): the first k dims
        moved to the end (nt.ops.transpose; k = 1 when neither is given)."""
        self.check_own("transpose", x)
        if perm is not None and ndim is not None:
            raise TypeError("transpose: give perm (any permutation) or ndim (the cyclic "
                            "transpose), not both")
        name = self.fresh_name("transpose", name)
        if perm is not None:
            return ops.permute(x, name, perm, alpha)
        return ops.transpose(x, name, alpha, 1 if ndim is None else ndim)

    # -- analysis --------------------------------------------------------------------
    def topological_order(self) -> list:
        """The ops in an order where each runs after those whose results it reads
        (program order is one)."""
        return self.ops()

    def producer(self, tensor):
        """The last op writing `tensor` (name or node), or None for an input/parameter."""
        tensor = self.as_tensor(tensor)
        writers = [op for op in self.ops() if any(t is tensor for t in op.outputs)]
        return writers[-1] if writers else None

    def consumers(self, tensor) -> list:
        """The ops reading `tensor` (name or node), in program order."""
        tensor = self.as_tensor(tensor)
        return [op for op in self.ops() if any(t is tensor for t in op.reads)]

    def inputs(self) -> list:
        return [t for t in self.tensors() if t.role == "input"]

    def outputs(self) -> list:
        return [t for t in self.tensors() if t.is_output and t.grad_of is None]

    def parameters(self) -> list:
        return [t for t in self.tensors() if t.role == "parameter"]

    # -- helpers ---------------------------------------------------------------------
    def as_tensor(self, tensor) -> TensorNode:
        return self.resolve(tensor) if isinstance(tensor, str) else tensor

    def check_own(self, caller, *tensors):
        for tensor in tensors:
            if not isinstance(tensor, TensorNode):
                raise TypeError(f"{caller}: operand {tensor!r} is not a TensorNode")
            if tensor.graph is not self:
                raise ValueError(f"{caller}: tensor {tensor.name} belongs to graph "
                                 f"{tensor.graph.name!r}, not {self.name!r}")

    def fresh_name(self, base: str, name=None) -> str:
        """`name` if given, else base_N unused in this graph."""
        if name is not None:
            return name
        index = len(self.ops())
        while self.has_tensor(f"{base}_{index}"):
            index += 1
        return f"{base}_{index}"


def as_spec(caller, spec) -> TensorSpec:
    if not isinstance(spec, TensorSpec):
        raise TypeError(f"{caller}: expected a TensorSpec(shape, dtype), got {spec!r}")
    return spec


def builder_method(op_name, builder):
    """`builder` as a graph method: its output name keyword-only and optional."""
    signature = inspect.signature(builder)
    named = next((p for p in signature.parameters if p in NAME_PARAMETERS), None)
    rest = signature.replace(parameters=[p for p in signature.parameters.values()
                                         if p.name != named])

    @functools.wraps(builder)
    def method(self, *args, name=None, **kwargs):
        arguments = rest.bind(*args, **kwargs).arguments
        self.check_own(op_name, *(a for a in arguments.values() if isinstance(a, TensorNode)))
        if named is not None:
            arguments[named] = self.fresh_name(op_name, name)
        elif name is not None:
            raise TypeError(f"{op_name} writes an existing tensor: it takes no name")
        return builder(**arguments)

    method.__signature__ = inspect.Signature(
        [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD),
         *rest.parameters.values(),
         inspect.Parameter("name", inspect.Parameter.KEYWORD_ONLY, default=None)])
    return method


def install_builder_methods(graph_class):
    """Every nt.ops builder the class does not define itself becomes a method of it."""
    for op_name in dir(ops):
        builder = getattr(ops, op_name)
        if op_name.startswith("_") or op_name in NOT_BUILDERS or not callable(builder) \
                or hasattr(graph_class, op_name) \
                or not getattr(builder, "__module__", "").startswith("nntile_spmd.graph"):
            continue
        setattr(graph_class, op_name, builder_method(op_name, builder))
