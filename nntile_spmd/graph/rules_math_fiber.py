"""Graph layer: rules of seed 000's fiber ops (scale_fiber, norm_fiber and its in-place
and backward forms) and of sum_backward, the broadcast of a 0-d gradient.

A fiber of x along `axis` is as in rules_reduce (x's `axis` then its batch dims).
norm_fiber reduces over every other dim, tile by tile; the plan merges the partial
norms with hypot, so every axis may be split over tiles and ranks.
No numba, cupy or mpi4py here.
"""

from .backward_inplace import norm_fiber_inplace_rule
from .backward_math import norm_fiber_rule, scale_fiber_rule
from .registry import REQUIRED, OpSpec, always, labels, op_error, register
from .rules_common import numel, require_float, require_same_dtype
from .rules_reduce import fiber_labels, fiber_shape, sum_fiber_infer

FIBER_ATTRS = {"axis": 0, "batch_ndim": 0, "alpha": 1.0}


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
register(OpSpec(name="scale_fiber", kernel="scale_fiber", num_inputs=1, num_outputs=1,
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
    register(OpSpec(name=norm_name, kernel="norm_fiber", num_inputs=1, num_outputs=1,
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
register(OpSpec(name="norm_fiber_backward", kernel="norm_fiber_backward", num_inputs=3,
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
register(OpSpec(name="sum_backward", kernel="sum_backward", num_inputs=2, num_outputs=1,
                infer=sum_backward_infer,
                axes=lambda attrs, i, o: ((), labels("d", len(i[1])), labels("d", len(o[0]))),
                attrs={"alpha": 1.0}, flops=lambda attrs, i, o: numel(o[0]),
                differentiable=False, in_place=(1,)))
