"""Graph layer: refusals and in-place gradient rewrites shared by the families'
backward rules.

An op computing `out = f(inputs) + beta * out` keeps part of its old output; when that
old output is itself differentiated its gradient would be beta times the new one's, which
the rules do not build, so they refuse naming the op and the tensor.

Gradients are keyed by tensor name, so for an op that overwrites y, ctx.grad(y) stands
both for d/d(y after) and d/d(y before). Rules run in reverse program order: when an
in-place op's rule runs, every reader of the new y has already accumulated into
ctx.grad(y), and the op that produced the old y runs its rule later and reads ctx.grad(y).
So each in-place rule first uses ctx.grad(y) as d/d(new y) for the other inputs, then
rewrites it in place into d/d(old y), from the new y alone: linear ops scale it,
relu/sqrt/tanh/sigmoid have derivatives that are functions of their output. gelu, silu,
pow and multiply need the old value, which is gone: they keep no in-place rule (grad
raises), and the new-output forms are the ones to differentiate.
"""

from __future__ import annotations

from . import ops


def refuse_accumulating_output(op, ctx, out=None, keeps=(0.0,)):
    """Raise NotImplementedError if `op`'s beta is not in `keeps` and its output `out`
    (default the first) is differentiated. `keeps` may include 1.0 for ops whose old
    value, added unchanged, has the same gradient as the new one."""
    out = op.outputs[0] if out is None else out
    beta = op.attrs["beta"]
    if beta not in keeps and out.name in ctx.needed:
        raise NotImplementedError(f"grad: {op.name} accumulates into {out.name} "
                                  f"(beta={beta}); use beta=0 (a new output) in "
                                  f"differentiated code")


def refuse_old_value(op, ctx, tensor, reason):
    if ctx.needs(tensor):
        raise NotImplementedError(f"grad: {op.name} overwrites {tensor.name}, and {reason}; "
                                  f"use the new-output {op.op_type.removesuffix('_inplace')}")


def rewritable_grad(op, ctx, y):
    """ctx.grad(y), which the rule may rewrite: not a persistent gradient of `wrt`, whose
    sum over earlier executes a rewrite would scale as well."""
    grad = ctx.grad(y)
    if grad.persistent:
        raise NotImplementedError(f"grad: {op.name} overwrites {y.name}, a tensor whose "
                                  "gradient is requested; differentiate a copy of it")
    return grad


def replace_with(ctx, y, value):
    """ctx.grad(y) = value (add with beta 0 never reads the old gradient)."""
    ops.add_inplace(1.0, value, 0.0, ctx.grad(y))
