"""Graph layer: rules of reductions and fiber ops (sum, sum_fiber, add_fiber, softmax...)."""

from .backward_inplace import add_fiber_inplace_rule
from .backward_math import sum_rule
from .backward_norm import add_fiber_rule, softmax_rule, sum_fiber_rule
from .registry import OpSpec, labels, op_error, register
from .rules_common import (numel, require_axis, require_float, require_same_dtype)


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


register(OpSpec(name="sum", kernel="sum", num_inputs=1, num_outputs=1, infer=sum_infer,
                axes=lambda attrs, i, o: (labels("d", len(i[0])), ()),
                attrs={"alpha": 1.0, "beta": 0.0},
                reads_output=lambda attrs: attrs["beta"] != 0, beta_attr="beta",
                flops=lambda attrs, i, o: numel(i[0]), backward=sum_rule))

FIBER_ATTRS = {"axis": 0, "batch_ndim": 0, "alpha": 1.0, "beta": 0.0}


def sum_fiber_infer(op, attrs, inputs):
    (x,) = inputs
    require_float(op, x)
    return [(fiber_shape(op, attrs, x, inputs), x.dtype)]


register(OpSpec(name="sum_fiber", kernel="sum_fiber", num_inputs=1, num_outputs=1,
                infer=sum_fiber_infer, axes=lambda attrs, i, o: fiber_labels(attrs, len(i[0])),
                attrs=FIBER_ATTRS | {"redux": 0},
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
    register(OpSpec(name=add_fiber_name, kernel="add_fiber", num_inputs=2, num_outputs=1,
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


register(OpSpec(name="softmax_backward", kernel="softmax_backward", num_inputs=2, num_outputs=1,
                infer=softmax_backward_infer,
                axes=lambda attrs, i, o: (labels("d", len(i[0])),) * 3, attrs={"axis": 0},
                whole=whole_axis, reads_output=lambda attrs: True,
                flops=lambda attrs, i, o: 4 * numel(i[0]), differentiable=False))

# (logsumexp, whose axis may be split, is registered in rules_slice.py); maxsumexp has
# no gradient
for axis_op, axis_kind, axis_backward in (("softmax", "same", softmax_rule),
                                          ("maxsumexp", "pair", None)):
    register(OpSpec(name=axis_op, kernel=axis_op, num_inputs=1, num_outputs=1,
                    infer=along_axis_infer(axis_kind), axes=along_axis_axes(axis_kind),
                    attrs={"axis": 0}, whole=whole_axis,
                    flops=lambda attrs, i, o: 4 * numel(i[0]), backward=axis_backward,
                    differentiable=axis_backward is not None))
