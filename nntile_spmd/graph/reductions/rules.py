"""Graph layer: registry entries of the whole-tensor and fiber reductions (sum,
sum_fiber, add_fiber, softmax, multiply/sumprod/scale/norm_fiber, sum_backward); the
slice ops' entries are in slice_rules.py and register with these.

A fiber of x along `axis` is the vector x[.., :, ..] along that axis (followed by x's
trailing batch dims): LayerNorm's gamma and beta. Per tile these ops are elementwise, or a
sum over the other axes whose partial results the plan adds (norm_fiber's are merged
with hypot), so every axis may be split over tiles and ranks; softmax alone keeps its
axis whole.
"""

from __future__ import annotations

from ..checks import numel, require_axis, require_float, require_same_dtype
from ..registry import REQUIRED, OpSpec, add_entries, always, labels, op_error
from . import slice_rules
from .backward import (add_fiber_inplace_rule, add_fiber_rule, multiply_fiber_rule,
                       norm_fiber_inplace_rule, norm_fiber_rule, scale_fiber_rule, softmax_rule,
                       sum_fiber_rule, sum_rule, sumprod_fiber_rule)

ENTRIES: list[OpSpec] = []   # the family's registry entries, in writing order
add_spec = ENTRIES.append   # each add_spec(OpSpec(...)) below joins ENTRIES


def fiber_shape(op, attrs, full, tensors):
    """Shape of the fiber of `full` along attrs axis, followed by its batch dims."""
    axis, batch_ndim = attrs["axis"], attrs["batch_ndim"]
    if not isinstance(batch_ndim, int) or not 0 <= batch_ndim < max(full.ndim, 1):
        raise op_error(op, f"batch_ndim={batch_ndim!r} out of range", tensors)
    require_axis(op, axis, full.ndim - batch_ndim, tensors)
    return (full.shape[axis],) + full.shape[full.ndim - batch_ndim:]


def fiber_labels(attrs, ndim):
    full = labels("d", ndim)
    return full, (full[attrs["axis"]],) + full[ndim - attrs["batch_ndim"]:]


def sum_infer(op, attrs, inputs):
    require_float(op, *inputs)
    return [((), inputs[0].dtype)]


add_spec(OpSpec(name="sum", kernel="sum", num_inputs=1, num_outputs=1, infer=sum_infer,
                axes=lambda attrs, i, o: (labels("d", len(i[0])), ()),
                attrs={"alpha": 1.0, "beta": 0.0},
                reads_output=lambda attrs: attrs["beta"] != 0, beta_attr="beta",
                flops=lambda attrs, i, o: numel(i[0]), backward=sum_rule))

FIBER_BETA_ATTRS = {"axis": 0, "batch_ndim": 0, "alpha": 1.0, "beta": 0.0}


def sum_fiber_infer(op, attrs, inputs):
    (x,) = inputs
    require_float(op, x)
    return [(fiber_shape(op, attrs, x, inputs), x.dtype)]


add_spec(OpSpec(name="sum_fiber", kernel="sum_fiber", num_inputs=1, num_outputs=1,
                infer=sum_fiber_infer, axes=lambda attrs, i, o: fiber_labels(attrs, len(i[0])),
                attrs=FIBER_BETA_ATTRS | {"redux": 0},
                kernel_attrs=("axis", "batch_ndim", "alpha", "beta"),
                reads_output=lambda attrs: attrs["beta"] != 0, beta_attr="beta",
                flops=lambda attrs, i, o: numel(i[0]), backward=sum_fiber_rule))


def add_fiber_infer(op, attrs, inputs):
    fiber, full = inputs
    require_float(op, fiber, full)
    require_same_dtype(op, fiber, full)
    expected = fiber_shape(op, attrs, full, inputs)
    if fiber.shape != expected:
        raise op_error(op, f"{fiber.name} must have shape {list(expected)} "
                       f"(the fiber of {full.name} along axis {attrs['axis']})", inputs)
    return [(full.shape, full.dtype)]


def add_fiber_axes(attrs, in_shapes, out_shapes):
    full, fiber = fiber_labels(attrs, len(in_shapes[1]))
    return fiber, full, full


for add_fiber_name, add_fiber_backward in (("add_fiber", add_fiber_rule),
                                           ("add_fiber_inplace", add_fiber_inplace_rule)):
    add_spec(OpSpec(name=add_fiber_name, kernel="add_fiber", num_inputs=2, num_outputs=1,
                    infer=add_fiber_infer, axes=add_fiber_axes,
                    attrs={"axis": 0, "batch_ndim": 0, "alpha": 1.0, "beta": 1.0},
                    flops=lambda attrs, i, o: 3 * numel(o[0]), backward=add_fiber_backward,
                    in_place=(1,) if add_fiber_name == "add_fiber_inplace" else ()))


def along_axis_infer(kind):
    """Shape rule of softmax (same shape) and maxsumexp ([2] + the axis dropped)."""
    def infer(op, attrs, inputs):
        (x,) = inputs
        require_float(op, x)
        require_axis(op, attrs["axis"], x.ndim, inputs)
        dropped = x.shape[:attrs["axis"]] + x.shape[attrs["axis"] + 1:]
        shape = {"same": x.shape, "pair": (2,) + dropped}[kind]
        return [(shape, x.dtype)]
    return infer


def along_axis_axes(kind):
    def axes(attrs, in_shapes, out_shapes):
        x = labels("d", len(in_shapes[0]))
        dropped = x[:attrs["axis"]] + x[attrs["axis"] + 1:]
        return x, {"same": x, "pair": ("pair",) + dropped}[kind]
    return axes


def whole_axis(attrs, axes):
    """The reduced axis (and maxsumexp's pair axis) stays in one tile."""
    return frozenset({f"d{attrs['axis']}", "pair"})


def softmax_backward_infer(op, attrs, inputs):
    y, grad_output = inputs
    require_float(op, y, grad_output)
    require_same_dtype(op, y, grad_output)
    if y.shape != grad_output.shape:
        raise op_error(op, "shapes differ", inputs)
    require_axis(op, attrs["axis"], y.ndim, inputs)
    return [(y.shape, y.dtype)]


add_spec(OpSpec(name="softmax_backward", kernel="softmax_backward", num_inputs=2, num_outputs=1,
                infer=softmax_backward_infer,
                axes=lambda attrs, i, o: (labels("d", len(i[0])),) * 3, attrs={"axis": 0},
                whole=whole_axis, reads_output=lambda attrs: True,
                flops=lambda attrs, i, o: 4 * numel(i[0]), differentiable=False))

# (logsumexp, whose axis may be split, is registered in slice_rules.py); maxsumexp has
# no gradient
for axis_op, axis_kind, axis_backward in (("softmax", "same", softmax_rule),
                                          ("maxsumexp", "pair", None)):
    add_spec(OpSpec(name=axis_op, kernel=axis_op, num_inputs=1, num_outputs=1,
                    infer=along_axis_infer(axis_kind), axes=along_axis_axes(axis_kind),
                    attrs={"axis": 0}, whole=whole_axis,
                    flops=lambda attrs, i, o: 4 * numel(i[0]), backward=axis_backward,
                    differentiable=axis_backward is not None))

FIBER_ATTRS = {"axis": 0, "batch_ndim": 0, "alpha": 1.0}

# z = alpha * f (broadcast) * x;  dx += alpha * f (broadcast) * x  (both checked like add_fiber)
add_spec(OpSpec(name="multiply_fiber", kernel="multiply_fiber", num_inputs=2, num_outputs=1,
                infer=add_fiber_infer, axes=add_fiber_axes, attrs=FIBER_ATTRS,
                flops=lambda attrs, i, o: 2 * numel(o[0]), backward=multiply_fiber_rule))

add_spec(OpSpec(name="sumprod_fiber_backward", kernel="sumprod_fiber_backward", num_inputs=2,
                num_outputs=1, infer=add_fiber_infer, axes=add_fiber_axes, attrs=FIBER_ATTRS,
                reads_output=always, flops=lambda attrs, i, o: 3 * numel(o[0]),
                differentiable=False))


def sumprod_fiber_infer(op, attrs, inputs):
    x, y = inputs
    require_float(op, x, y)
    require_same_dtype(op, x, y)
    if x.shape != y.shape:
        raise op_error(op, f"{y.name} must have the shape of {x.name}", inputs)
    return [(fiber_shape(op, attrs, x, inputs), x.dtype)]


def sumprod_fiber_axes(attrs, in_shapes, out_shapes):
    full, fiber = fiber_labels(attrs, len(in_shapes[0]))
    return full, full, fiber    # labels missing from the fiber are summed tile by tile


# f = alpha * sum of x*y over all dims but `axis` and the batch dims + beta*f
add_spec(OpSpec(name="sumprod_fiber", kernel="sumprod_fiber", num_inputs=2, num_outputs=1,
                infer=sumprod_fiber_infer, axes=sumprod_fiber_axes,
                attrs=FIBER_ATTRS | {"beta": 0.0},
                reads_output=lambda attrs: attrs["beta"] != 0, beta_attr="beta",
                flops=lambda attrs, i, o: 2 * numel(i[0]), backward=sumprod_fiber_rule))


def scale_fiber_infer(op, attrs, inputs):
    """dst's shape is the attribute `shape` (a fiber cannot tell the other dims)."""
    (fiber,) = inputs
    require_float(op, fiber)
    shape = attrs["shape"]
    if not isinstance(shape, tuple) or not shape:
        raise op_error(op, f"shape={shape!r} must be a non-empty tuple", inputs)
    expected = fiber_shape(op, attrs, _Shaped(shape), inputs)
    if fiber.shape != expected:
        raise op_error(op, f"{fiber.name} must have shape {list(expected)} (the fiber of "
                       f"{list(shape)} along axis {attrs['axis']})", inputs)
    return [(shape, fiber.dtype)]


class _Shaped:
    """The shape and ndim of a tensor not created yet, for fiber_shape."""

    def __init__(self, shape):
        self.shape, self.ndim = shape, len(shape)


def full_and_fiber_axes(attrs, in_shapes, out_shapes):
    """Labels of (fiber) -> full for scale_fiber."""
    full, fiber = fiber_labels(attrs, len(out_shapes[0]))
    return fiber, full


# y = alpha * f broadcast along every dim but `axis` and the batch dims (NNTile's scale_fiber)
add_spec(OpSpec(name="scale_fiber", kernel="scale_fiber", num_inputs=1, num_outputs=1,
                infer=scale_fiber_infer, axes=full_and_fiber_axes,
                attrs=FIBER_ATTRS | {"shape": REQUIRED},
                kernel_attrs=("axis", "batch_ndim", "alpha"),
                flops=lambda attrs, i, o: numel(o[0]), backward=scale_fiber_rule))

# y = hypot(alpha * 2-norm of x over every dim but the fiber's, beta*y): the new-output
# form (beta = 0 unless it merges into a given y) and NNTile's norm_fiber_inplace
NORM_BETA = dict(beta_attr="beta", reads_output=lambda attrs: attrs["beta"] != 0,
                 combine="hypot", flops=lambda attrs, i, o: 2 * numel(i[0]))

for norm_name, beta, norm_backward in (("norm_fiber", 0.0, norm_fiber_rule),
                                       ("norm_fiber_inplace", 1.0, norm_fiber_inplace_rule)):
    add_spec(OpSpec(name=norm_name, kernel="norm_fiber", num_inputs=1, num_outputs=1,
                    infer=sum_fiber_infer,
                    axes=lambda attrs, i, o: fiber_labels(attrs, len(i[0])),
                    attrs=FIBER_ATTRS | {"beta": beta}, backward=norm_backward, **NORM_BETA))


def norm_fiber_backward_infer(op, attrs, inputs):
    x, y, dy = inputs
    require_float(op, *inputs)
    require_same_dtype(op, *inputs)
    expected = fiber_shape(op, attrs, x, inputs)
    for fiber in (y, dy):
        if fiber.shape != expected:
            raise op_error(op, f"{fiber.name} must have shape {list(expected)} (the fiber "
                           f"of {x.name} along axis {attrs['axis']})", inputs)
    return [(x.shape, x.dtype)]


def norm_fiber_backward_axes(attrs, in_shapes, out_shapes):
    full, fiber = fiber_labels(attrs, len(in_shapes[0]))
    return full, fiber, fiber, full


# dx += alpha^2 * x / y * dy, y and dy fibers broadcast: norm_fiber's gradient
add_spec(OpSpec(name="norm_fiber_backward", kernel="norm_fiber_backward", num_inputs=3,
                num_outputs=1, infer=norm_fiber_backward_infer, axes=norm_fiber_backward_axes,
                attrs=FIBER_ATTRS, reads_output=always,
                flops=lambda attrs, i, o: 3 * numel(o[0]), differentiable=False))


def sum_backward_infer(op, attrs, inputs):
    dy, dx = inputs
    require_float(op, dy, dx)
    require_same_dtype(op, dy, dx)
    if dy.shape != ():
        raise op_error(op, f"{dy.name} must be 0-d (the gradient of a total sum)", inputs)
    return [(dx.shape, dx.dtype)]


# dx = dx + alpha * dy, dy 0-d, inputs (dy, dx), output dx itself: sum's gradient
add_spec(OpSpec(name="sum_backward", kernel="sum_backward", num_inputs=2, num_outputs=1,
                infer=sum_backward_infer,
                axes=lambda attrs, i, o: ((), labels("d", len(i[1])), labels("d", len(o[0]))),
                attrs={"alpha": 1.0}, flops=lambda attrs, i, o: numel(o[0]),
                differentiable=False, in_place=(1,)))


def register(registry: dict) -> None:
    """Add the reductions entries to `registry` (graph/families.py calls it)."""
    add_entries(registry, ENTRIES + slice_rules.ENTRIES)

