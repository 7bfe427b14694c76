"""Graph layer: registry entries of the elementwise family. Every array of these ops
shares one axis map, so the plan tiles them alike; the backward rules are in backward.py.

sub, div, tanh, sigmoid and the hypot forms tile like add; clear, fill and add_scalar
write a tensor they are given, of any shape.
"""

from __future__ import annotations

from ..checks import (elementwise_axes, elementwise_flops, elementwise_infer, given_output,
                      numel, output_only_axes)
from ..dtypes import check_dtype
from ..registry import REQUIRED, OpSpec, add_entries, always, op_error
from .backward import (add_inplace_rule, add_rule, copy_rule, div_rule, hypot_inplace_rule,
                       hypot_rule, multiply_rule, pow_rule, relu_inplace_rule,
                       scale_inplace_rule, scale_rule, sigmoid_inplace_rule, sqrt_inplace_rule,
                       sub_rule, tanh_inplace_rule, unary_rule)

ENTRIES: list[OpSpec] = []   # the family's registry entries, in writing order
add_spec = ENTRIES.append   # each add_spec(OpSpec(...)) below joins ENTRIES

# op -> (FLOPs per element of forward, FLOPs per element of backward, backward rule of
# the in-place form: None where f' needs the overwritten x)
UNARY_OPS = {"gelu": (8, 12, None), "gelutanh": (10, 14, None),
             "relu": (1, 2, relu_inplace_rule), "silu": (5, 8, None),
             "sqrt": (1, 3, sqrt_inplace_rule)}


def add_unary(name: str, forward_cost: int, backward_cost: int, inplace_backward):
    """y = f(x), its in-place form, and dx += f'(x) * dy (the kernel of unary_rule)."""
    flops = elementwise_flops(forward_cost)
    add_spec(OpSpec(name=name, kernel=name, num_inputs=1, num_outputs=1,
                    infer=elementwise_infer, axes=elementwise_axes, flops=flops,
                    backward=unary_rule))
    add_spec(OpSpec(name=f"{name}_inplace", kernel=name, num_inputs=1, num_outputs=1,
                    infer=elementwise_infer, axes=elementwise_axes, flops=flops,
                    backward=inplace_backward, in_place=(0,)))
    add_spec(OpSpec(name=f"{name}_backward", kernel=f"{name}_backward", num_inputs=2,
                    num_outputs=1, infer=elementwise_infer, axes=elementwise_axes,
                    reads_output=always, flops=elementwise_flops(backward_cost)))


for unary_name, unary_entry in UNARY_OPS.items():
    add_unary(unary_name, *unary_entry)

# tanh and sigmoid: f' is a function of the output, so their in-place forms keep a rule
for unary_name, unary_entry in {"tanh": (6, 8, tanh_inplace_rule),
                                "sigmoid": (7, 9, sigmoid_inplace_rule)}.items():
    add_unary(unary_name, *unary_entry)

AXPBY = {"alpha": 1.0, "beta": 1.0}

add_spec(OpSpec(name="add", kernel="add", num_inputs=2, num_outputs=1, infer=elementwise_infer,
                axes=elementwise_axes, attrs=AXPBY, flops=elementwise_flops(3),
                backward=add_rule))

# the binary *_inplace kernels are elementwise loops: y = f(y, y) in place is right too
add_spec(OpSpec(name="add_inplace", kernel="add", num_inputs=2, num_outputs=1,
                infer=elementwise_infer, axes=elementwise_axes, attrs=AXPBY,
                flops=elementwise_flops(3), backward=add_inplace_rule, in_place=(0, 1)))

add_spec(OpSpec(name="multiply", kernel="multiply", num_inputs=2, num_outputs=1,
                infer=elementwise_infer, axes=elementwise_axes, attrs={"alpha": 1.0},
                flops=elementwise_flops(2), backward=multiply_rule))

add_spec(OpSpec(name="multiply_inplace", kernel="multiply", num_inputs=2, num_outputs=1,
                infer=elementwise_infer, axes=elementwise_axes, attrs={"alpha": 1.0},
                flops=elementwise_flops(2), in_place=(0, 1)))

add_spec(OpSpec(name="scale", kernel="scale", num_inputs=1, num_outputs=1,
                infer=elementwise_infer, axes=elementwise_axes, attrs={"alpha": 1.0},
                flops=elementwise_flops(1), backward=scale_rule))

add_spec(OpSpec(name="scale_inplace", kernel="scale", num_inputs=1, num_outputs=1,
                infer=elementwise_infer, axes=elementwise_axes, attrs={"alpha": 1.0},
                flops=elementwise_flops(1), backward=scale_inplace_rule, in_place=(0,)))

# z = x - y and z = x / y
add_spec(OpSpec(name="sub", kernel="sub", num_inputs=2, num_outputs=1, infer=elementwise_infer,
                axes=elementwise_axes, flops=elementwise_flops(1), backward=sub_rule))

add_spec(OpSpec(name="div", kernel="div", num_inputs=2, num_outputs=1, infer=elementwise_infer,
                axes=elementwise_axes, flops=elementwise_flops(1), backward=div_rule))

# z = hypot(alpha*x, beta*y) (NNTile's hypot), and the same into y itself
HYPOT_ATTRS = {"alpha": 1.0, "beta": 1.0}

for hypot_name, hypot_backward in (("hypot", hypot_rule), ("hypot_inplace", hypot_inplace_rule)):
    add_spec(OpSpec(name=hypot_name, kernel="hypot", num_inputs=2, num_outputs=1,
                    infer=elementwise_infer, axes=elementwise_axes, attrs=HYPOT_ATTRS,
                    flops=elementwise_flops(4), backward=hypot_backward,
                    in_place=(0, 1) if hypot_name == "hypot_inplace" else ()))

# dx += alpha^2 * x / z * dz, inputs (x, z, dz): the gradient of z = hypot(alpha*x, ...)
add_spec(OpSpec(name="hypot_backward", kernel="hypot_backward", num_inputs=3, num_outputs=1,
                infer=elementwise_infer, axes=elementwise_axes, attrs={"alpha": 1.0},
                reads_output=always, flops=elementwise_flops(4), differentiable=False))


def hypot_scalar_inverse_infer(op, attrs, inputs):
    if not isinstance(attrs["eps"], (int, float)) or attrs["eps"] == 0:
        raise op_error(op, f"eps={attrs['eps']!r} must be a nonzero real number (x = 0 "
                       "would divide by zero)", inputs)
    return elementwise_infer(op, attrs, inputs)


# x = 1 / hypot(alpha*x, eps), in place as in NNTile. Not differentiable: the old x is
# overwritten and its sign cannot be recovered from the result; differentiate
# hypot + pow(exp=-1) instead
add_spec(OpSpec(name="hypot_scalar_inverse", kernel="hypot_scalar_inverse", num_inputs=1,
                num_outputs=1, infer=hypot_scalar_inverse_infer, axes=elementwise_axes,
                attrs={"eps": REQUIRED, "alpha": 1.0}, flops=elementwise_flops(5),
                differentiable=False, in_place=(0,)))

# pow (NNTile's y = alpha * x**exp), its in-place form (no rule: the derivative needs the
# overwritten x), and dx += alpha*exp*x**(exp-1)*dy
POW_ATTRS = {"alpha": 1.0, "exp": 1.0}

for pow_name, pow_backward in (("pow", pow_rule), ("pow_inplace", None)):
    add_spec(OpSpec(name=pow_name, kernel="pow", num_inputs=1, num_outputs=1,
                    infer=elementwise_infer, axes=elementwise_axes, attrs=POW_ATTRS,
                    flops=elementwise_flops(2), backward=pow_backward,
                    in_place=(0,) if pow_name == "pow_inplace" else ()))

add_spec(OpSpec(name="pow_backward", kernel="pow_backward", num_inputs=2, num_outputs=1,
                infer=elementwise_infer, axes=elementwise_axes, attrs=POW_ATTRS,
                reads_output=always, flops=elementwise_flops(4), differentiable=False))

add_spec(OpSpec(name="clear", kernel="clear", num_inputs=0, num_outputs=1, infer=given_output,
                axes=output_only_axes, differentiable=False))

add_spec(OpSpec(name="fill", kernel="fill", num_inputs=0, num_outputs=1, infer=given_output,
                axes=output_only_axes, attrs={"value": 0.0}, differentiable=False))

add_spec(OpSpec(name="add_scalar", kernel="add_scalar", num_inputs=0, num_outputs=1,
                infer=given_output, axes=output_only_axes, attrs={"value": 1},
                reads_output=always, differentiable=False))


def copy_infer(op, attrs, inputs):
    return [(inputs[0].shape, inputs[0].dtype)]


def cast_infer(op, attrs, inputs):
    try:
        dtype = check_dtype(attrs["dtype"])
    except TypeError as error:
        raise op_error(op, str(error), inputs, TypeError) from None
    return [(inputs[0].shape, dtype)]


add_spec(OpSpec(name="copy", kernel="copy", num_inputs=1, num_outputs=1, infer=copy_infer,
                axes=elementwise_axes, flops=lambda attrs, i, o: 0, backward=copy_rule))

add_spec(OpSpec(name="cast", kernel="cast", num_inputs=1, num_outputs=1, infer=cast_infer,
                axes=elementwise_axes, attrs={"dtype": "fp32"}, kernel_attrs=(),
                flops=lambda attrs, i, o: numel(o[0]), backward=copy_rule))


def register(registry: dict) -> None:
    """Add the elementwise entries to `registry` (graph/families.py calls it)."""
    add_entries(registry, ENTRIES)

