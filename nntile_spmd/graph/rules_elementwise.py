"""Graph layer: rules of elementwise ops (unary, their backward forms, binary)."""

from .registry import OpSpec, always, register
from .rules_common import elementwise_axes, elementwise_flops, elementwise_infer

# op -> (FLOPs per element of forward, FLOPs per element of backward)
UNARY_COSTS = {"gelu": (8, 12), "gelutanh": (10, 14), "relu": (1, 2),
               "silu": (5, 8), "sqrt": (1, 3)}


def register_unary(name: str, forward_cost: int, backward_cost: int):
    """y = f(x), its in-place form, and dx += f'(x) * dy."""
    flops = elementwise_flops(forward_cost)
    register(OpSpec(name, name, 1, 1, elementwise_infer, elementwise_axes, flops=flops))
    register(OpSpec(f"{name}_inplace", name, 1, 1, elementwise_infer, elementwise_axes,
                    flops=flops))
    register(OpSpec(f"{name}_backward", f"{name}_backward", 2, 1, elementwise_infer,
                    elementwise_axes, reads_output=always,
                    flops=elementwise_flops(backward_cost)))


for unary_name, (forward, backward) in UNARY_COSTS.items():
    register_unary(unary_name, forward, backward)

AXPBY = {"alpha": 1.0, "beta": 1.0}
register(OpSpec("add", "add", 2, 1, elementwise_infer, elementwise_axes, attrs=AXPBY,
                flops=elementwise_flops(3)))
register(OpSpec("add_inplace", "add", 2, 1, elementwise_infer, elementwise_axes,
                attrs=AXPBY, flops=elementwise_flops(3)))
register(OpSpec("multiply", "multiply", 2, 1, elementwise_infer, elementwise_axes,
                attrs={"alpha": 1.0}, flops=elementwise_flops(2)))
register(OpSpec("multiply_inplace", "multiply", 2, 1, elementwise_infer, elementwise_axes,
                attrs={"alpha": 1.0}, flops=elementwise_flops(2)))
register(OpSpec("scale", "scale", 1, 1, elementwise_infer, elementwise_axes,
                attrs={"alpha": 1.0}, flops=elementwise_flops(1)))
register(OpSpec("scale_inplace", "scale", 1, 1, elementwise_infer, elementwise_axes,
                attrs={"alpha": 1.0}, flops=elementwise_flops(1)))
