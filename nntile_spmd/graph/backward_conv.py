"""Graph layer: conv2d_inplace's backward rule (its registry entry in rules_conv.py):
the two backward convolutions, each accumulating into ctx.grad(input).
"""

from __future__ import annotations

from . import ops
from .backward_refusals import refuse_accumulating_output


def conv2d_rule(op, ctx):
    """dX += alpha * conv^T(dY, C) and dC += alpha * corr(X, dY), both linear in dY."""
    x, c = op.inputs
    y = op.outputs[0]
    attrs = op.attrs
    refuse_accumulating_output(op, ctx)
    dy, alpha = ctx.grad(y), attrs["alpha"]
    shape = {key: attrs[key] for key in ("padding", "stride", "dilation")}
    if ctx.needs(x):
        ops.conv2d_bwd_input_inplace(alpha, dy, c, 1.0, ctx.grad(x), **shape)
    if ctx.needs(c):
        ops.conv2d_bwd_weight_inplace(alpha, x, dy, 1.0, ctx.grad(c), **shape)
