"""Graph layer: registry entries and backward rules of the data-movement ops. Each
op's gradient is the copy the other way, added into the input's gradient.

Each op copies boxes of its input into its output. The dims that move (a slice's
axis, every dim of gather/scatter/reshape) carry different labels on the two sides, so
they are tiled independently: the input's labels are summed over, one step per input
tile, and `step_needed` drops the steps whose input tile does not meet the output tile,
so an output tile fetches only the input tiles it overlaps. The kernels (`add_box`,
`reshape_box`) compute y = beta*y + (x placed in y's box); the steps of one output tile
write disjoint parts, so the plan's partial results merge by `add`. The gradients are
the copies the other way: slice <-> slice_backward, gather <-> scatter, reshape back.
"""

from __future__ import annotations

from .. import ops
from ..checks import numel, require_axis, require_float, require_int
from ..gradients import refuse_accumulating_output
from ..registry import REQUIRED, OpSpec, add_entries, labels, op_error

ENTRIES: list[OpSpec] = []   # the family's registry entries, in writing order
add_spec = ENTRIES.append   # each add_spec(OpSpec(...)) below joins ENTRIES


def slice_rule(op, ctx):
    (x,), (y,) = op.inputs, op.outputs
    refuse_accumulating_output(op, ctx)
    if ctx.needs(x):
        ops.slice_backward(ctx.grad(y), ctx.grad(x), op.attrs["axis"], op.attrs["start"])


def slice_backward_rule(op, ctx):
    (dy,), (dx,) = op.inputs, op.outputs
    # beta = 1 adds into dx, whose old value then has the same gradient as the new one
    refuse_accumulating_output(op, ctx, keeps=(0.0, 1.0))
    if ctx.needs(dy):
        start = op.attrs["start"]
        ops.slice(ctx.grad(dx), ctx.grad(dy), op.attrs["axis"], start,
                  start + dy.shape[op.attrs["axis"]], beta=1.0)


def retile_rule(backward):
    def rule(op, ctx):
        (x,), (y,) = op.inputs, op.outputs
        refuse_accumulating_output(op, ctx)
        if ctx.needs(x):
            backward(ctx.grad(y), ctx.grad(x), beta=1.0)
    return rule


def reshape_rule(op, ctx):
    (x,), (y,) = op.inputs, op.outputs
    refuse_accumulating_output(op, ctx)
    if ctx.needs(x):
        ops.reshape(ctx.grad(y), ctx.grad(x), x.shape, beta=1.0)


gather_rule = retile_rule(ops.scatter)

scatter_rule = retile_rule(ops.gather)


def embedding_rule(op, ctx):
    index, vocab = op.inputs
    if ctx.needs(vocab):
        ops.embedding_backward(index, ctx.grad(op.outputs[0]), ctx.grad(vocab),
                               op.attrs["axis"])


BETA = dict(beta_attr="beta", reads_output=lambda attrs: attrs["beta"] != 0, flops=lambda *a: 0)


def require_int_attr(op, attrs, key, inputs, low=0, high=None):
    value = attrs[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < low or \
            (high is not None and value > high):
        bound = f"in [{low}, {high}]" if high is not None else f">= {low}"
        raise op_error(op, f"{key}={value!r} must be an int {bound}", inputs)
    return value


def concrete(op, tensor, dims, inputs):
    for dim in dims:
        if not isinstance(tensor.shape[dim], int):
            raise op_error(op, f"dim {dim} of {tensor.name} must have a concrete size, not "
                           f"the symbol {tensor.shape[dim]!r} (bind it first)", inputs)


# -- slice: y = x[start:stop] along axis; slice_backward: dx[start:start+n] = dy + beta*dx
def slice_infer(op, attrs, inputs):
    (x,) = inputs
    require_float(op, x)
    require_axis(op, attrs["axis"], x.ndim, inputs)
    axis = attrs["axis"]
    concrete(op, x, [axis], inputs)
    start = require_int_attr(op, attrs, "start", inputs, 0, x.shape[axis] - 1)
    stop = require_int_attr(op, attrs, "stop", inputs, start + 1, x.shape[axis])
    return [(x.shape[:axis] + (stop - start,) + x.shape[axis + 1:], x.dtype)]


def slice_backward_infer(op, attrs, inputs):
    (dy,) = inputs
    require_float(op, dy)
    require_axis(op, attrs["axis"], dy.ndim, inputs)
    axis = attrs["axis"]
    concrete(op, dy, [axis], inputs)
    start = require_int_attr(op, attrs, "start", inputs, 0)
    size = attrs["size"]
    if not isinstance(size, int) or size < start + dy.shape[axis]:
        raise op_error(op, f"the output's axis {axis} (size {size}) cannot hold {dy.name}'s "
                       f"{dy.shape[axis]} entries from start={start}", inputs)
    return [(dy.shape[:axis] + (size,) + dy.shape[axis + 1:], dy.dtype)]


def moved_axis_labels(attrs, in_shapes, out_shapes):
    """The slice axis differs on the two sides; the other dims are one axis each."""
    common = labels("d", len(in_shapes[0]))
    axis = attrs["axis"]
    return (common[:axis] + ("from",) + common[axis + 1:],
            common[:axis] + ("to",) + common[axis + 1:])


def shifted(offset, axis, by):
    return offset[:axis] + (offset[axis] + by,) + offset[axis + 1:]


def slice_boxes(attrs, offsets):
    """x's and y's tile offsets in x's coordinates."""
    return {"x_offset": tuple(offsets[0]), "y_offset": shifted(tuple(offsets[1]), attrs["axis"],
                                                               attrs["start"])}


def slice_backward_boxes(attrs, offsets):
    """dy's and dx's tile offsets in dx's coordinates."""
    return {"x_offset": shifted(tuple(offsets[0]), attrs["axis"], attrs["start"]),
            "y_offset": tuple(offsets[1])}


def boxes_meet(boxes):
    def needed(attrs, offsets, shapes, whole_shapes):
        params = boxes(attrs, offsets)
        return all(max(a, b) < min(a + n, b + m) for a, n, b, m in
                   zip(params["x_offset"], shapes[0], params["y_offset"], shapes[1]))
    return needed


add_spec(OpSpec(name="slice", kernel="add_box", num_inputs=1, num_outputs=1,
                infer=slice_infer, axes=moved_axis_labels,
                attrs={"axis": REQUIRED, "start": REQUIRED, "stop": REQUIRED, "beta": 0.0},
                tile_params=slice_boxes, step_needed=boxes_meet(slice_boxes), view="box",
                kernel_attrs=("beta",), backward=slice_rule, **BETA))

add_spec(OpSpec(name="slice_backward", kernel="add_box", num_inputs=1, num_outputs=1,
                infer=slice_backward_infer, axes=moved_axis_labels,
                attrs={"axis": REQUIRED, "start": REQUIRED, "size": REQUIRED, "beta": 1.0},
                tile_params=slice_backward_boxes, step_needed=boxes_meet(slice_backward_boxes),
                kernel_attrs=("beta",), backward=slice_backward_rule, **BETA))


# -- gather (all tiles into one) and scatter (one tile into all) --------------------------
def same_infer(op, attrs, inputs):
    return [(inputs[0].shape, inputs[0].dtype)]


def retile_axes(attrs, in_shapes, out_shapes):
    return labels("in", len(in_shapes[0])), labels("out", len(out_shapes[0]))


def plain_boxes(attrs, offsets):
    return {"x_offset": tuple(offsets[0]), "y_offset": tuple(offsets[1])}


def whole_side(prefix):
    return lambda attrs, axes: frozenset(label for array in axes for label in array
                                         if label.startswith(prefix))


for name, side, retile_backward in (("gather", "out", gather_rule),
                                    ("scatter", "in", scatter_rule)):
    add_spec(OpSpec(name=name, kernel="add_box", num_inputs=1, num_outputs=1,
                    infer=same_infer, axes=retile_axes, attrs={"beta": 0.0},
                    whole=whole_side(side), tile_params=plain_boxes,
                    step_needed=boxes_meet(plain_boxes), kernel_attrs=("beta",),
                    backward=retile_backward, **BETA))


# -- reshape: the same elements in column-major order, another shape ----------------------
def reshape_infer(op, attrs, inputs):
    (x,) = inputs
    shape = attrs["shape"]
    if not isinstance(shape, (list, tuple)) or \
            not all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in shape):
        raise op_error(op, f"shape={shape!r} must be a list of positive ints", inputs)
    concrete(op, x, range(x.ndim), inputs)
    count = 1
    for n in x.shape:
        count *= n
    wanted = 1
    for n in shape:
        wanted *= n
    if wanted != count:
        raise op_error(op, f"shape {list(shape)} holds {wanted} elements, {x.name} {count}",
                       inputs)
    return [(tuple(shape), x.dtype)]


def flat_range(offset, shape, whole):
    """First and last column-major flat index of a box of a tensor shaped `whole`."""
    first = last = 0
    stride = 1
    for start, size, total in zip(offset, shape, whole):
        first += start * stride
        last += (start + size - 1) * stride
        stride *= total
    return first, last


def reshape_shapes(attrs, in_shapes, out_shapes):
    return {"x_shape": tuple(in_shapes[0]), "y_shape": tuple(out_shapes[0])}


def reshape_step_needed(attrs, offsets, shapes, whole_shapes):
    x_first, x_last = flat_range(offsets[0], shapes[0], whole_shapes[0])
    y_first, y_last = flat_range(offsets[1], shapes[1], whole_shapes[1])
    return x_first <= y_last and y_first <= x_last


add_spec(OpSpec(name="reshape", kernel="reshape_box", num_inputs=1, num_outputs=1,
                infer=reshape_infer, axes=retile_axes,
                attrs={"shape": REQUIRED, "beta": 0.0}, tile_params=plain_boxes,
                shape_params=reshape_shapes, step_needed=reshape_step_needed, view="flat",
                kernel_attrs=("beta",), backward=reshape_rule, **BETA))


# -- log_scalar: the value of a 0-d tensor at this point of the program, kept by name -----
def log_scalar_infer(op, attrs, inputs):
    (x,) = inputs
    require_float(op, x)
    if x.ndim != 0:
        raise op_error(op, f"{x.name} must be a 0-d tensor (a scalar), not {x.ndim}-d", inputs)
    return [((), x.dtype)]


add_spec(OpSpec(name="log_scalar", kernel="copy", num_inputs=1, num_outputs=1,
                infer=log_scalar_infer, axes=lambda attrs, in_shapes, out_shapes: ((), ()),
                differentiable=False))


def embedding_infer(op, attrs, inputs):
    index, vocab = inputs
    require_int(op, index)
    require_float(op, vocab)
    if vocab.ndim != 2:
        raise op_error(op, f"{vocab.name} must be [embed_dim, vocab_size]", inputs)
    if not isinstance(attrs["axis"], int) or not 0 <= attrs["axis"] <= index.ndim:
        raise op_error(op, f"axis={attrs['axis']!r} out of range", inputs)
    shape = index.shape[:attrs["axis"]] + (vocab.shape[0],) + index.shape[attrs["axis"]:]
    return [(shape, vocab.dtype)]


def embedding_axes(attrs, in_shapes, out_shapes):
    index = labels("b", len(in_shapes[0]))
    embedded = index[:attrs["axis"]] + ("e",) + index[attrs["axis"]:]
    return index, ("e", "v"), embedded


add_spec(OpSpec(name="embedding", kernel="embedding", num_inputs=2, num_outputs=1,
                infer=embedding_infer, axes=embedding_axes, attrs={"axis": 0, "beta": 0.0},
                beta_attr="beta", reads_output=lambda attrs: attrs["beta"] != 0,
                tile_params=lambda attrs, offsets: {"vocab_offset": offsets[1][1]},
                shape_params=lambda attrs, i, o: {"vocab_size": i[1][1]},
                flops=lambda attrs, i, o: numel(o[0]), backward=embedding_rule))


def embedding_backward_infer(op, attrs, inputs):
    index, grad_output = inputs
    require_int(op, index)
    require_float(op, grad_output)
    return [None]


def embedding_backward_axes(attrs, in_shapes, out_shapes):
    index = labels("b", len(in_shapes[0]))
    return index, index[:attrs["axis"]] + ("e",) + index[attrs["axis"]:], ("e", "v")


add_spec(OpSpec(name="embedding_backward", kernel="embedding_backward", num_inputs=2,
                num_outputs=1, infer=embedding_backward_infer, axes=embedding_backward_axes,
                attrs={"axis": 0, "beta": 1.0}, beta_attr="beta",
                reads_output=lambda attrs: attrs["beta"] != 0,
                tile_params=lambda attrs, offsets: {"vocab_offset": offsets[2][1]},
                shape_params=lambda attrs, i, o: {"vocab_size": o[0][1]},
                flops=lambda attrs, i, o: numel(i[1]), differentiable=False))


def register(registry: dict) -> None:
    """Add the data movement entries to `registry` (graph/families.py calls it)."""
    add_entries(registry, ENTRIES)

