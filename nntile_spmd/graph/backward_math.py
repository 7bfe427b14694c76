"""Graph layer: backward rules of the seed elementwise ops and reductions (registry
entries in rules_math.py, rules_math_fiber.py and, for sum, rules_reduce.py; tanh and
sigmoid use backward_elementwise.unary_rule). Each adds ordinary ops accumulating into
ctx.grad(input); backward_inplace.py has the rules of their in-place forms.
"""

from __future__ import annotations

from . import ops, ops_math
from .backward_refusals import refuse_accumulating_output


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
    quotient = ops_math.div(ctx.grad(z), y, ctx.temp(f"{z.name}_dquotient"))
    if ctx.needs(x):
        ops.add_inplace(1.0, quotient, 1.0, ctx.grad(x))
    if ctx.needs(y):
        product = ops.multiply(quotient, z, ctx.temp(f"{y.name}_ddiv"), alpha=-1.0)
        ops.add_inplace(1.0, product, 1.0, ctx.grad(y))


def hypot_rule(op, ctx):
    z = op.outputs[0]
    for tensor, coefficient in zip(op.inputs, (op.attrs["alpha"], op.attrs["beta"])):
        if ctx.needs(tensor) and coefficient != 0:
            ops_math.hypot_backward(tensor, z, ctx.grad(z), ctx.grad(tensor), coefficient)


def extremum_rule(op, ctx):
    """The gradient goes to the entries equal to the max (min); k tied entries get 1/k of
    it each, a rule that does not depend on tile order or rank count."""
    (x,), (y,) = op.inputs, op.outputs
    refuse_accumulating_output(op, ctx)
    if ctx.needs(x):
        axis = op.attrs["axis"]
        count = ops_math.extremum_count(x, y, ctx.temp(f"{y.name}_ties"), axis)
        ops_math.extremum_backward(x, y, count, ctx.grad(y), ctx.grad(x), axis)


def norm_slice_rule(op, ctx):
    (x,), (y,) = op.inputs, op.outputs
    refuse_accumulating_output(op, ctx)
    if ctx.needs(x):
        ops_math.norm_slice_backward(x, y, ctx.grad(y), ctx.grad(x), op.attrs["axis"],
                                     op.attrs["alpha"])


def scale_fiber_rule(op, ctx):
    (fiber,), (y,) = op.inputs, op.outputs
    if ctx.needs(fiber):   # each fiber entry fed every entry of its slab: gradients add up
        ops.sum_fiber(ctx.grad(y), ctx.grad(fiber), op.attrs["axis"], op.attrs["batch_ndim"],
                      alpha=op.attrs["alpha"], beta=1.0)


def norm_fiber_rule(op, ctx):
    (x,), (y,) = op.inputs, op.outputs
    refuse_accumulating_output(op, ctx)
    if ctx.needs(x):
        ops_math.norm_fiber_backward(x, y, ctx.grad(y), ctx.grad(x), op.attrs["axis"],
                                     op.attrs["batch_ndim"], op.attrs["alpha"])


def sum_rule(op, ctx):
    (x,), (s,) = op.inputs, op.outputs
    refuse_accumulating_output(op, ctx)
    if ctx.needs(x):
        ops_math.sum_backward(ctx.grad(s), ctx.grad(x), op.attrs["alpha"])
