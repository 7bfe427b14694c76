"""Graph layer: rules of elementwise ops (unary, their backward forms, binary, pow,
mask_scalar, mask_causal)."""

from .backward_elementwise import (add_rule, mask_causal_rule, mask_scalar_rule, multiply_rule,
                                   scale_rule, unary_rule)
from .backward_inplace import (add_inplace_rule, relu_inplace_rule, scale_inplace_rule,
                               sqrt_inplace_rule)
from .backward_norm import pow_rule
from .registry import REQUIRED, OpSpec, always, labels, op_error, register
from .rules_common import elementwise_axes, elementwise_flops, elementwise_infer, require_float

# op -> (FLOPs per element of forward, FLOPs per element of backward, backward rule of
# the in-place form: None where f' needs the overwritten x)
UNARY_OPS = {"gelu": (8, 12, None), "gelutanh": (10, 14, None),
             "relu": (1, 2, relu_inplace_rule), "silu": (5, 8, None),
             "sqrt": (1, 3, sqrt_inplace_rule)}


def register_unary(name: str, forward_cost: int, backward_cost: int, inplace_backward):
    """y = f(x), its in-place form, and dx += f'(x) * dy (the kernel of unary_rule)."""
    flops = elementwise_flops(forward_cost)
    register(OpSpec(name=name, kernel=name, num_inputs=1, num_outputs=1,
                    infer=elementwise_infer, axes=elementwise_axes, flops=flops,
                    backward=unary_rule))
    register(OpSpec(name=f"{name}_inplace", kernel=name, num_inputs=1, num_outputs=1,
                    infer=elementwise_infer, axes=elementwise_axes, flops=flops,
                    backward=inplace_backward, in_place=(0,)))
    register(OpSpec(name=f"{name}_backward", kernel=f"{name}_backward", num_inputs=2,
                    num_outputs=1, infer=elementwise_infer, axes=elementwise_axes,
                    reads_output=always, flops=elementwise_flops(backward_cost)))


for unary_name, unary_entry in UNARY_OPS.items():
    register_unary(unary_name, *unary_entry)

AXPBY = {"alpha": 1.0, "beta": 1.0}
register(OpSpec(name="add", kernel="add", num_inputs=2, num_outputs=1, infer=elementwise_infer,
                axes=elementwise_axes, attrs=AXPBY, flops=elementwise_flops(3),
                backward=add_rule))
# the binary *_inplace kernels are elementwise loops: y = f(y, y) in place is right too
register(OpSpec(name="add_inplace", kernel="add", num_inputs=2, num_outputs=1,
                infer=elementwise_infer, axes=elementwise_axes, attrs=AXPBY,
                flops=elementwise_flops(3), backward=add_inplace_rule, in_place=(0, 1)))
register(OpSpec(name="multiply", kernel="multiply", num_inputs=2, num_outputs=1,
                infer=elementwise_infer, axes=elementwise_axes, attrs={"alpha": 1.0},
                flops=elementwise_flops(2), backward=multiply_rule))
register(OpSpec(name="multiply_inplace", kernel="multiply", num_inputs=2, num_outputs=1,
                infer=elementwise_infer, axes=elementwise_axes, attrs={"alpha": 1.0},
                flops=elementwise_flops(2), in_place=(0, 1)))
register(OpSpec(name="scale", kernel="scale", num_inputs=1, num_outputs=1,
                infer=elementwise_infer, axes=elementwise_axes, attrs={"alpha": 1.0},
                flops=elementwise_flops(1), backward=scale_rule))
register(OpSpec(name="scale_inplace", kernel="scale", num_inputs=1, num_outputs=1,
                infer=elementwise_infer, axes=elementwise_axes, attrs={"alpha": 1.0},
                flops=elementwise_flops(1), backward=scale_inplace_rule, in_place=(0,)))

# pow (NNTile's y = alpha * x**exp), its in-place form (no rule: the derivative needs the
# overwritten x), and dx += alpha*exp*x**(exp-1)*dy
POW_ATTRS = {"alpha": 1.0, "exp": 1.0}
for pow_name, pow_backward in (("pow", pow_rule), ("pow_inplace", None)):
    register(OpSpec(name=pow_name, kernel="pow", num_inputs=1, num_outputs=1,
                    infer=elementwise_infer, axes=elementwise_axes, attrs=POW_ATTRS,
                    flops=elementwise_flops(2), backward=pow_backward,
                    in_place=(0,) if pow_name == "pow_inplace" else ()))
register(OpSpec(name="pow_backward", kernel="pow_backward", num_inputs=2, num_outputs=1,
                infer=elementwise_infer, axes=elementwise_axes, attrs=POW_ATTRS,
                reads_output=always, flops=elementwise_flops(4), differentiable=False))


# -- mask_scalar: A = val where mask is False, in place ---------------------------------
def mask_scalar_infer(op, attrs, inputs):
    mask, a = inputs
    batch_ndim = attrs["batch_ndim"]
    if not isinstance(batch_ndim, int) or not 0 <= batch_ndim <= a.ndim:
        raise op_error(op, f"batch_ndim={batch_ndim!r} out of range for {a.ndim} dims", inputs)
    if mask.dtype != "bool":
        raise op_error(op, f"{mask.name} must be a bool tensor", inputs, TypeError)
    require_float(op, a)
    expected = a.shape[:a.ndim - batch_ndim]
    if mask.shape != expected:
        raise op_error(op, f"{mask.name} must have shape {list(expected)} (the leading "
                       f"dims of {a.name} before its {batch_ndim} batch dims)", inputs)
    return [(a.shape, a.dtype)]


def mask_scalar_axes(attrs, in_shapes, out_shapes):
    """The mask's axes are A's leading axes: its tiles follow A's tiling."""
    a = labels("d", len(in_shapes[1]))
    return a[:len(a) - attrs["batch_ndim"]], a, a


# inputs (mask, A), output A itself: the kernel is y = where(mask, x, val) on aliased x, y
register(OpSpec(name="mask_scalar", kernel="mask_scalar", num_inputs=2, num_outputs=1,
                infer=mask_scalar_infer, axes=mask_scalar_axes,
                attrs={"val": REQUIRED, "batch_ndim": 0}, flops=elementwise_flops(1),
                backward=mask_scalar_rule, in_place=(1,)))


# -- mask_causal: A[key, query, batch...] = val where key > query, in place ---------------
def mask_causal_infer(op, attrs, inputs):
    (a,) = inputs
    require_float(op, a)
    if a.ndim < 2:
        raise op_error(op, f"{a.name} must be [keys, queries, batch...]", inputs)
    return [(a.shape, a.dtype)]


def crosses_diagonal(attrs, offsets, shapes, whole_shapes):
    """Only a tile with some key index > some query index has entries to mask."""
    (key_start, query_start), (key_size, _) = offsets[0][:2], shapes[0][:2]
    return key_start + key_size - 1 > query_start


register(OpSpec(name="mask_causal", kernel="mask_causal", num_inputs=1, num_outputs=1,
                infer=mask_causal_infer, axes=elementwise_axes, attrs={"val": REQUIRED},
                flops=elementwise_flops(1), step_needed=crosses_diagonal,
                tile_params=lambda attrs, offsets: {"key_offset": offsets[0][0],
                                                    "query_offset": offsets[0][1]},
                backward=mask_causal_rule, in_place=(0,)))
