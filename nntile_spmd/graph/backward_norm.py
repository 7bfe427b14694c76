"""Graph layer: backward rules of the slice and fiber ops (registry entries in
rules_slice.py, rules_reduce.py and rules_fiber.py: LayerNorm's and attention's
primitives) and of pow (rules_elementwise.py). Each rule adds ordinary ops that
accumulate into ctx.grad(input); no rule needs a full-size temporary.
"""

from __future__ import annotations

from . import ops
from .backward_refusals import refuse_accumulating_output


def sum_slice_rule(op, ctx):
    (x,), (s,) = op.inputs, op.outputs
    refuse_accumulating_output(op, ctx)
    if ctx.needs(x):   # dx += alpha * ds broadcast along the axis
        ops.add_slice_inplace(op.attrs["alpha"], ctx.grad(s), 1.0, ctx.grad(x), op.attrs["axis"])


def add_slice_rule(op, ctx):
    s, x = op.inputs
    attrs = op.attrs
    dz = ctx.grad(op.outputs[0])
    if ctx.needs(x) and attrs["beta"] != 0:
        ops.add_inplace(attrs["beta"], dz, 1.0, ctx.grad(x))
    if ctx.needs(s):
        ops.sum_slice(dz, ctx.grad(s), attrs["axis"], alpha=attrs["alpha"], beta=1.0)


def multiply_slice_rule(op, ctx):
    s, x = op.inputs
    attrs = op.attrs
    dz = ctx.grad(op.outputs[0])
    if ctx.needs(x):   # dx += alpha * s * dz
        ops.sumprod_slice_backward(s, dz, ctx.grad(x), attrs["axis"], attrs["alpha"])
    if ctx.needs(s):   # ds += alpha * sum over the axis of dz * x
        ops.sumprod_slice(dz, x, ctx.grad(s), attrs["axis"], alpha=attrs["alpha"], beta=1.0)


def multiply_fiber_rule(op, ctx):
    f, x = op.inputs
    axis, batch_ndim, alpha = op.attrs["axis"], op.attrs["batch_ndim"], op.attrs["alpha"]
    dz = ctx.grad(op.outputs[0])
    if ctx.needs(x):   # dx += alpha * f * dz
        ops.sumprod_fiber_backward(f, dz, ctx.grad(x), axis, batch_ndim, alpha)
    if ctx.needs(f):   # df += alpha * sum over the other axes of dz * x
        ops.sumprod_fiber(dz, x, ctx.grad(f), axis, batch_ndim, alpha=alpha, beta=1.0)


def sumprod_fiber_rule(op, ctx):
    x, y = op.inputs
    refuse_accumulating_output(op, ctx)
    axis, batch_ndim, alpha = op.attrs["axis"], op.attrs["batch_ndim"], op.attrs["alpha"]
    df = ctx.grad(op.outputs[0])
    for tensor, other in ((x, y), (y, x)):   # x is y (a sum of squares) gets both terms
        if ctx.needs(tensor):
            ops.sumprod_fiber_backward(df, other, ctx.grad(tensor), axis, batch_ndim, alpha)


def pow_rule(op, ctx):
    (x,), (y,) = op.inputs, op.outputs
    if ctx.needs(x):
        ops.pow_backward(x, ctx.grad(y), ctx.grad(x), op.attrs["alpha"], op.attrs["exp"])


def softmax_rule(op, ctx):
    (x,), (y,) = op.inputs, op.outputs
    if ctx.needs(x):
        ops.softmax_backward(y, ctx.grad(y), ctx.grad(x), op.attrs["axis"])


def sumprod_slice_rule(op, ctx):
    x, y = op.inputs
    attrs = op.attrs
    z = op.outputs[0]
    refuse_accumulating_output(op, ctx)
    dz = ctx.grad(z)
    for tensor, other in ((x, y), (y, x)):   # x is y (a sum of squares) gets both terms
        if ctx.needs(tensor):
            ops.sumprod_slice_backward(dz, other, ctx.grad(tensor), attrs["axis"],
                                       attrs["alpha"])


def logsumexp_rule(op, ctx):
    (x,), (y,) = op.inputs, op.outputs
    refuse_accumulating_output(op, ctx)
    if ctx.needs(x):
        ops.logsumexp_backward(x, y, ctx.grad(y), ctx.grad(x), op.attrs["axis"])


def softmax_from_logsumexp_rule(op, ctx):
    """dx += y * (dy - sum over axis of y*dy): softmax's total derivative.

    The input lse is logsumexp(x) by contract, so lse gets no gradient: its path,
    -y * sum(y*dy), is already the second term here. The sum runs over the axis's
    tiles (sumprod_slice), so the axis may stay split.
    """
    lse, x = op.inputs
    (y,) = op.outputs
    if ctx.needs(x):
        axis, dy = op.attrs["axis"], ctx.grad(y)
        dot = ops.sumprod_slice(y, dy, ctx.temp(f"{y.name}_dot_grad"), axis)
        ops.softmax_from_logsumexp_backward(y, dy, dot, ctx.grad(x), axis)


def sum_fiber_rule(op, ctx):
    (x,), (y,) = op.inputs, op.outputs
    if ctx.needs(x):
        ops.add_fiber_inplace(op.attrs["alpha"], ctx.grad(y), 1.0, ctx.grad(x),
                              op.attrs["axis"], op.attrs["batch_ndim"])


def add_fiber_rule(op, ctx):
    fiber, full = op.inputs
    dz = ctx.grad(op.outputs[0])
    if ctx.needs(full) and op.attrs["beta"] != 0:
        ops.add_inplace(op.attrs["beta"], dz, 1.0, ctx.grad(full))
    if ctx.needs(fiber):
        ops.sum_fiber(dz, ctx.grad(fiber), op.attrs["axis"], op.attrs["batch_ndim"],
                      alpha=op.attrs["alpha"], beta=1.0)
