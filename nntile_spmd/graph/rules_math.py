"""Graph layer: rules of the seed elementwise ops (seed 003's sub, div, tanh, sigmoid;
seed 000's hypot family) and of the reductions along one axis (max, min, norm_slice)
with the kernels their backward rules emit.

Elementwise ops tile like add. A reduction keeps no axis whole: each tile reduces its
part and the plan merges the partials of the axis's tiles with the op's combine kernel
(maximum, minimum, hypot), so the axis may be split over tiles and ranks.
No numba, cupy or mpi4py here.
"""

from .backward_inplace import (hypot_inplace_rule, norm_slice_inplace_rule, sigmoid_inplace_rule,
                               tanh_inplace_rule)
from .backward_math import div_rule, extremum_rule, hypot_rule, norm_slice_rule, sub_rule
from .registry import REQUIRED, OpSpec, always, op_error, register
from .rules_common import elementwise_axes, elementwise_flops, elementwise_infer
from .rules_elementwise import register_unary
from .rules_slice import BETA, register_slice_op

# -- elementwise ------------------------------------------------------------------------
for unary_name, unary_entry in {"tanh": (6, 8, tanh_inplace_rule),
                                "sigmoid": (7, 9, sigmoid_inplace_rule)}.items():
    register_unary(unary_name, *unary_entry)

# z = x - y and z = x / y (seed 003)
register(OpSpec(name="sub", kernel="sub", num_inputs=2, num_outputs=1, infer=elementwise_infer,
                axes=elementwise_axes, flops=elementwise_flops(1), backward=sub_rule))
register(OpSpec(name="div", kernel="div", num_inputs=2, num_outputs=1, infer=elementwise_infer,
                axes=elementwise_axes, flops=elementwise_flops(1), backward=div_rule))

# z = hypot(alpha*x, beta*y) (NNTile's hypot), and the same into y itself
HYPOT_ATTRS = {"alpha": 1.0, "beta": 1.0}
for hypot_name, hypot_backward in (("hypot", hypot_rule), ("hypot_inplace", hypot_inplace_rule)):
    register(OpSpec(name=hypot_name, kernel="hypot", num_inputs=2, num_outputs=1,
                    infer=elementwise_infer, axes=elementwise_axes, attrs=HYPOT_ATTRS,
                    flops=elementwise_flops(4), backward=hypot_backward,
                    in_place=(0, 1) if hypot_name == "hypot_inplace" else ()))
# dx += alpha^2 * x / z * dz, inputs (x, z, dz): the gradient of z = hypot(alpha*x, ...)
register(OpSpec(name="hypot_backward", kernel="hypot_backward", num_inputs=3, num_outputs=1,
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
register(OpSpec(name="hypot_scalar_inverse", kernel="hypot_scalar_inverse", num_inputs=1,
                num_outputs=1, infer=hypot_scalar_inverse_infer, axes=elementwise_axes,
                attrs={"eps": REQUIRED, "alpha": 1.0}, flops=elementwise_flops(5),
                differentiable=False, in_place=(0,)))

# -- reductions along one axis (the builders chain them over several axes) -------------
# y = max (min) of x along `axis`, merged with beta*y (the partial of earlier tiles)
register_slice_op("max", "f->s", {"axis": 0, "beta": 0.0}, 1, kernel="max_slice",
                  combine="maximum", backward=extremum_rule, **BETA)
register_slice_op("min", "f->s", {"axis": 0, "beta": 0.0}, 1, kernel="min_slice",
                  combine="minimum", backward=extremum_rule, **BETA)
# count = number of x equal to the extremum y along `axis` (+ beta*count): partial counts add
register_slice_op("extremum_count", "fs->s", {"axis": 0, "beta": 0.0}, 1,
                  differentiable=False, **BETA)
# dx += dy / count where x equals y (inputs x, y, count, dy): ties share the gradient
register_slice_op("extremum_backward", "fsss->f", {"axis": 0}, 2, reads_output=always,
                  differentiable=False)
# y = hypot(alpha * 2-norm of x along `axis`, beta*y) (NNTile's norm_slice_inplace); the
# new-output form norm_slice has beta = 0 unless it accumulates into a given y
NORM_ATTRS = {"axis": 0, "alpha": 1.0, "beta": 0.0}
register_slice_op("norm_slice", "f->s", NORM_ATTRS, 2, combine="hypot",
                  backward=norm_slice_rule, **BETA)
register_slice_op("norm_slice_inplace", "f->s", NORM_ATTRS | {"beta": 1.0}, 2,
                  kernel="norm_slice", combine="hypot", backward=norm_slice_inplace_rule,
                  **BETA)
# dx += alpha^2 * x / y * dy, y and dy broadcast along `axis`: norm_slice's gradient
register_slice_op("norm_slice_backward", "fss->f", {"axis": 0, "alpha": 1.0}, 3,
                  reads_output=always, differentiable=False)
