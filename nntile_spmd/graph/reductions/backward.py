"""Graph layer: backward rules of the reductions family (named by the entries in
rules.py and slice_rules.py: LayerNorm's and attention's gradients are built from them).
Each adds ordinary ops accumulating into ctx.grad(input).
"""

from __future__ import annotations

from .. import ops
from ..gradients import refuse_accumulating_output, refuse_old_value, rewritable_grad


def sum_rule(op, ctx):
    (x,), (s,) = op.inputs, op.outputs
    refuse_accumulating_output(op, ctx)
    if ctx.needs(x):
        ops.sum_backward(ctx.grad(s), ctx.grad(x), op.attrs["alpha"])


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


def softmax_rule(op, ctx):
    (x,), (y,) = op.inputs, op.outputs
    if ctx.needs(x):
        ops.softmax_backward(y, ctx.grad(y), ctx.grad(x), op.attrs["axis"])


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


def scale_fiber_rule(op, ctx):
    (fiber,), (y,) = op.inputs, op.outputs
    if ctx.needs(fiber):   # each fiber entry fed every entry of its slab: gradients add up
        ops.sum_fiber(ctx.grad(y), ctx.grad(fiber), op.attrs["axis"], op.attrs["batch_ndim"],
                      alpha=op.attrs["alpha"], beta=1.0)


def norm_fiber_rule(op, ctx):
    (x,), (y,) = op.inputs, op.outputs
    refuse_accumulating_output(op, ctx)
    if ctx.needs(x):
        ops.norm_fiber_backward(x, y, ctx.grad(y), ctx.grad(x), op.attrs["axis"],
                                     op.attrs["batch_ndim"], op.attrs["alpha"])


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


def extremum_rule(op, ctx):
    """The gradient goes to the entries equal to the max (min); k tied entries get 1/k of
    it each, a rule that does not depend on tile order or rank count."""
    (x,), (y,) = op.inputs, op.outputs
    refuse_accumulating_output(op, ctx)
    if ctx.needs(x):
        axis = op.attrs["axis"]
        count = ops.extremum_count(x, y, ctx.temp(f"{y.name}_ties"), axis)
        ops.extremum_backward(x, y, count, ctx.grad(y), ctx.grad(x), axis)


def norm_slice_rule(op, ctx):
    (x,), (y,) = op.inputs, op.outputs
    refuse_accumulating_output(op, ctx)
    if ctx.needs(x):
        ops.norm_slice_backward(x, y, ctx.grad(y), ctx.grad(x), op.attrs["axis"],
                                     op.attrs["alpha"])


def add_slice_inplace_rule(op, ctx):
    s, x = op.inputs
    dx = rewritable_grad(op, ctx, x)
    if ctx.needs(s):
        ops.sum_slice(dx, ctx.grad(s), op.attrs["axis"], alpha=op.attrs["alpha"], beta=1.0)
    if op.attrs["beta"] != 1:
        ops.scale_inplace(dx, op.attrs["beta"])


def add_fiber_inplace_rule(op, ctx):
    fiber, x = op.inputs
    dx = rewritable_grad(op, ctx, x)
    if ctx.needs(fiber):
        ops.sum_fiber(dx, ctx.grad(fiber), op.attrs["axis"], op.attrs["batch_ndim"],
                      alpha=op.attrs["alpha"], beta=1.0)
    if op.attrs["beta"] != 1:
        ops.scale_inplace(dx, op.attrs["beta"])


def norm_inplace_rule(backward):
    """norm_slice_inplace / norm_fiber_inplace: dx from the new y as for the new-output
    form; the old y only enters with beta == 0, as in hypot_inplace."""
    def rule(op, ctx):
        (x,), (y,) = op.inputs, op.outputs
        rewritable_grad(op, ctx, y)
        if op.attrs["beta"] != 0:
            refuse_old_value(op, ctx, y, "d/d(old y) needs the old y (its sign is lost)")
        if ctx.needs(x):
            backward(op, x, y, ctx)
        ops.clear(ctx.grad(y))
    return rule


def norm_slice_backward(op, x, y, ctx):
    ops.norm_slice_backward(x, y, ctx.grad(y), ctx.grad(x), op.attrs["axis"],
                                 op.attrs["alpha"])


def norm_fiber_backward(op, x, y, ctx):
    ops.norm_fiber_backward(x, y, ctx.grad(y), ctx.grad(x), op.attrs["axis"],
                                 op.attrs["batch_ndim"], op.attrs["alpha"])


norm_slice_inplace_rule = norm_inplace_rule(norm_slice_backward)

norm_fiber_inplace_rule = norm_inplace_rule(norm_fiber_backward)
