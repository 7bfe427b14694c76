"""Graph layer: backward rules of the in-place ops whose gradient survives the overwrite
(each named by its op's registry entry, next to the new-output form's).

Gradients are keyed by tensor name, so for an op that overwrites y, ctx.grad(y) stands
both for d/d(y after) and d/d(y before) (as in backward_elementwise.mask_scalar_rule).
Rules run in reverse program order: when one of these runs, every reader of the new y has already
accumulated into ctx.grad(y), and the op that produced the old y runs its rule later
and reads ctx.grad(y). So each rule first uses ctx.grad(y) as d/d(new y) for the other
inputs, then rewrites it in place into d/d(old y), from the new y alone: linear ops
scale it, relu/sqrt/tanh/sigmoid have derivatives that are functions of their output.
gelu, silu, pow and multiply need the old value, which is gone: they keep no rule
(grad raises), and the new-output forms are the ones to differentiate.
"""

from __future__ import annotations

from . import ops, ops_math


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


def scale_inplace_rule(op, ctx):
    (x,) = op.inputs
    ops.scale_inplace(rewritable_grad(op, ctx, x), op.attrs["alpha"])


def add_inplace_rule(op, ctx):
    x, y = op.inputs
    dy = rewritable_grad(op, ctx, y)
    if ctx.needs(x) and op.attrs["alpha"] != 0:
        ops.add_inplace(op.attrs["alpha"], dy, 1.0, ctx.grad(x))
    if op.attrs["beta"] != 1:
        ops.scale_inplace(dy, op.attrs["beta"])


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


def relu_inplace_rule(op, ctx):
    """relu'(x) = [y > 0], y = relu(x): relu_backward of y gives it."""
    (y,) = op.inputs
    rewritable_grad(op, ctx, y)
    masked = ctx.graph.tensor(y.shape, ctx.temp(f"{y.name}_drelu"), y.dtype)
    ops.clear(masked)
    ops.relu_backward(y, ctx.grad(y), masked)
    replace_with(ctx, y, masked)


def sqrt_inplace_rule(op, ctx):
    """sqrt'(x) = 1 / (2y)."""
    (y,) = op.inputs
    rewritable_grad(op, ctx, y)
    quotient = ops_math.div(ctx.grad(y), y, ctx.temp(f"{y.name}_dsqrt"))
    ops.add_inplace(0.5, quotient, 0.0, ctx.grad(y))


def tanh_inplace_rule(op, ctx):
    """tanh'(x) = 1 - y^2: dy -= y^2 * dy."""
    (y,) = op.inputs
    rewritable_grad(op, ctx, y)
    square = ops.multiply(y, y, ctx.temp(f"{y.name}_squared"))
    product = ops.multiply(square, ctx.grad(y), ctx.temp(f"{y.name}_dtanh"), alpha=-1.0)
    ops.add_inplace(1.0, product, 1.0, ctx.grad(y))


def sigmoid_inplace_rule(op, ctx):
    """sigmoid'(x) = y - y^2."""
    (y,) = op.inputs
    rewritable_grad(op, ctx, y)
    square = ops.multiply(y, y, ctx.temp(f"{y.name}_squared"))
    slope = ops_math.sub(y, square, ctx.temp(f"{y.name}_slope"))
    replace_with(ctx, y, ops.multiply(slope, ctx.grad(y), ctx.temp(f"{y.name}_dsigmoid")))


def hypot_inplace_rule(op, ctx):
    """dx += alpha^2 x / y dy from the new y; the old y only enters with beta == 0."""
    x, y = op.inputs
    rewritable_grad(op, ctx, y)
    if op.attrs["beta"] != 0:
        refuse_old_value(op, ctx, y, "d/d(old y) needs the old y (its sign is lost)")
    if ctx.needs(x) and op.attrs["alpha"] != 0:
        ops_math.hypot_backward(x, y, ctx.grad(y), ctx.grad(x), op.attrs["alpha"])
    ops.clear(ctx.grad(y))   # beta == 0: the old y does not reach the new one


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
    ops_math.norm_slice_backward(x, y, ctx.grad(y), ctx.grad(x), op.attrs["axis"],
                                 op.attrs["alpha"])


def norm_fiber_backward(op, x, y, ctx):
    ops_math.norm_fiber_backward(x, y, ctx.grad(y), ctx.grad(x), op.attrs["axis"],
                                 op.attrs["batch_ndim"], op.attrs["alpha"])


norm_slice_inplace_rule = norm_inplace_rule(norm_slice_backward)
norm_fiber_inplace_rule = norm_inplace_rule(norm_fiber_backward)
