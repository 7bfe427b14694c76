"""Graph layer: backward rules of the elementwise ops (registry entries in
rules_elementwise.py and rules_math.py). Each adds ordinary ops accumulating into
ctx.grad(input).
"""

from __future__ import annotations

from . import ops


def unary_rule(op, ctx):
    (x,), (y,) = op.inputs, op.outputs
    if ctx.needs(x):
        ops.apply(f"{op.op_type}_backward", [x, ctx.grad(y)], [ctx.grad(x)])


def add_rule(op, ctx):
    x, y = op.inputs
    dz = ctx.grad(op.outputs[0])
    for tensor, coefficient in ((x, op.attrs["alpha"]), (y, op.attrs["beta"])):
        if ctx.needs(tensor) and coefficient != 0:
            ops.add_inplace(coefficient, dz, 1.0, ctx.grad(tensor))


def multiply_rule(op, ctx):
    x, y = op.inputs
    dz = ctx.grad(op.outputs[0])
    for tensor, other in ((x, y), (y, x)):
        if ctx.needs(tensor):
            product = ops.multiply(dz, other, ctx.temp(f"{tensor.name}_dprod"),
                                   alpha=op.attrs["alpha"])
            ops.add_inplace(1.0, product, 1.0, ctx.grad(tensor))


def scale_rule(op, ctx):
    (x,), (y,) = op.inputs, op.outputs
    if ctx.needs(x):
        ops.add_inplace(op.attrs["alpha"], ctx.grad(y), 1.0, ctx.grad(x))


def mask_scalar_rule(op, ctx):
    """Zero the masked entries of grad(A), in place.

    mask_scalar works in place and gradients are keyed by tensor name, so ctx.grad(A)
    stands both for d/d(A after masking) and d/d(A before masking). Rules run in
    reverse program order: when this one runs, every reader of the masked A has
    already accumulated into ctx.grad(A), and the op that produced A before masking
    runs its rule afterwards and reads ctx.grad(A). The masked entries were
    overwritten by val and no longer depend on the old A, the kept ones are passed
    through unchanged, so zeroing the masked entries turns the first gradient into
    exactly the second.
    """
    mask, a = op.inputs
    if ctx.needs(a):
        ops.mask_scalar(mask, 0.0, ctx.grad(a), op.attrs["batch_ndim"])


def mask_causal_rule(op, ctx):
    """Zero the masked entries of grad(A), in place (as mask_scalar_rule, same reasons)."""
    (a,) = op.inputs
    if ctx.needs(a):
        ops.mask_causal(0.0, ctx.grad(a))
