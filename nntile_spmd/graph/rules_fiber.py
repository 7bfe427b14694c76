"""Graph layer: rules of the products between a tensor and a fiber (multiply_fiber,
sumprod_fiber and its backward form), next to add_fiber/sum_fiber in rules_reduce.

A fiber of x along `axis` is the vector x[.., :, ..] along that axis (followed by x's
trailing batch dims): LayerNorm's gamma and beta. Per tile these ops are elementwise,
or a sum over the other axes whose partial results the plan adds, so every axis may
be split over tiles and ranks.
"""

from .backward_norm import multiply_fiber_rule, sumprod_fiber_rule
from .registry import OpSpec, always, op_error, register
from .rules_common import numel, require_float, require_same_dtype
from .rules_reduce import add_fiber_axes, add_fiber_infer, fiber_labels, fiber_shape

FIBER_ATTRS = {"axis": 0, "batch_ndim": 0, "alpha": 1.0}

# z = alpha * f (broadcast) * x;  dx += alpha * f (broadcast) * x  (both checked like add_fiber)
register(OpSpec(name="multiply_fiber", kernel="multiply_fiber", num_inputs=2, num_outputs=1,
                infer=add_fiber_infer, axes=add_fiber_axes, attrs=FIBER_ATTRS,
                flops=lambda attrs, i, o: 2 * numel(o[0]), backward=multiply_fiber_rule))
register(OpSpec(name="sumprod_fiber_backward", kernel="sumprod_fiber_backward", num_inputs=2,
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
register(OpSpec(name="sumprod_fiber", kernel="sumprod_fiber", num_inputs=2, num_outputs=1,
                infer=sumprod_fiber_infer, axes=sumprod_fiber_axes,
                attrs=FIBER_ATTRS | {"beta": 0.0},
                reads_output=lambda attrs: attrs["beta"] != 0, beta_attr="beta",
                flops=lambda attrs, i, o: 2 * numel(i[0]), backward=sumprod_fiber_rule))
