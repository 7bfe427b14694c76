"""Graph layer: backward rules of the elementwise family (named by the entries in
rules.py). Each adds ordinary ops accumulating into ctx.grad(input); the in-place forms
rewrite ctx.grad(y) as graph/gradients.py explains.
"""

from __future__ import annotations

from .. import ops
from ..gradients import refuse_old_value, replace_with, rewritable_grad


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


def sub_rule(op, ctx):
    dz = ctx.grad(op.outputs[0])
    for tensor, sign in zip(op.inputs, (1.0, -1.0)):
        if ctx.needs(tensor):
            ops.add_inplace(sign, dz, 1.0, ctx.grad(tensor))


def div_rule(op, ctx):
    """dx += dz / y, dy -= dz * x / y^2 = (dz / y) * z."""
    x, y = op.inputs
    z = op.outputs[0]
    if not (ctx.needs(x) or ctx.needs(y)):
        return
    quotient = ops.div(ctx.grad(z), y, ctx.temp(f"{z.name}_dquotient"))
    if ctx.needs(x):
        ops.add_inplace(1.0, quotient, 1.0, ctx.grad(x))
    if ctx.needs(y):
        product = ops.multiply(quotient, z, ctx.temp(f"{y.name}_ddiv"), alpha=-1.0)
        ops.add_inplace(1.0, product, 1.0, ctx.grad(y))


def hypot_rule(op, ctx):
    z = op.outputs[0]
    for tensor, coefficient in zip(op.inputs, (op.attrs["alpha"], op.attrs["beta"])):
        if ctx.needs(tensor) and coefficient != 0:
            ops.hypot_backward(tensor, z, ctx.grad(z), ctx.grad(tensor), coefficient)


def pow_rule(op, ctx):
    (x,), (y,) = op.inputs, op.outputs
    if ctx.needs(x):
        ops.pow_backward(x, ctx.grad(y), ctx.grad(x), op.attrs["alpha"], op.attrs["exp"])


def copy_rule(op, ctx):
    (x,), (y,) = op.inputs, op.outputs
    if ctx.needs(x):
        source = ctx.grad(y)
        if op.op_type == "cast":
            source = ops.cast(source, x.dtype, ctx.temp(f"{x.name}_dcast"))
            if y.copy_of is not None:   # a parameter's compute copy: shard with its grad
                source.copy_of = ctx.grad(x).name
        ops.add_inplace(1.0, source, 1.0, ctx.grad(x))


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
    quotient = ops.div(ctx.grad(y), y, ctx.temp(f"{y.name}_dsqrt"))
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
    slope = ops.sub(y, square, ctx.temp(f"{y.name}_slope"))
    replace_with(ctx, y, ops.multiply(slope, ctx.grad(y), ctx.temp(f"{y.name}_dsigmoid")))


def hypot_inplace_rule(op, ctx):
    """dx += alpha^2 x / y dy from the new y; the old y only enters with beta == 0."""
    x, y = op.inputs
    rewritable_grad(op, ctx, y)
    if op.attrs["beta"] != 0:
        refuse_old_value(op, ctx, y, "d/d(old y) needs the old y (its sign is lost)")
    if ctx.needs(x) and op.attrs["alpha"] != 0:
        ops.hypot_backward(x, y, ctx.grad(y), ctx.grad(x), op.attrs["alpha"])
    ops.clear(ctx.grad(y))   # beta == 0: the old y does not reach the new one
