"""Graph layer: backward rules of rope and scale_slice (registry entries in
rules_rope.py). Each adds ordinary ops accumulating into ctx.grad(input).
"""

from __future__ import annotations

from . import ops_rope
from .ops_slice import sum_slice


def rope_rule(op, ctx):
    sin, cos, src = op.inputs
    for table in (sin, cos):
        if ctx.needs(table):   # the tables are position constants in every model here
            raise NotImplementedError(f"grad: {op.name} has no gradient for its table "
                                      f"{table.name}; make it a constant input")
    if ctx.needs(src):
        ops_rope.rope_backward(sin, cos, ctx.grad(op.outputs[0]), ctx.grad(src))


def scale_slice_rule(op, ctx):
    (src,) = op.inputs
    if ctx.needs(src):   # each src element fed `size` outputs: their gradients add up
        sum_slice(ctx.grad(op.outputs[0]), ctx.grad(src), op.attrs["axis"],
                  alpha=op.attrs["alpha"], beta=1.0)
