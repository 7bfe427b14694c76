"""Graph layer: backward rules of the data-movement ops (registry entries in
rules_data.py). Each op's gradient is the copy the other way, added into
ctx.grad(input) with beta = 1: slice <-> slice_backward, gather <-> scatter, reshape
back to the input's shape.
"""

from __future__ import annotations

from . import ops
from .backward_refusals import refuse_accumulating_output


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
