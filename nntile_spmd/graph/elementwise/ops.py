"""Graph layer: builders of the elementwise family (entries in rules.py), re-exported
by `nntile_spmd.ops`.
"""

from __future__ import annotations

from ..apply import apply


# -- unary ops, with their in-place and backward forms -----------------------------
def _unary(op_type):
    def forward(x, name):
        return apply(op_type, [x], [name])

    def inplace(x):
        return apply(f"{op_type}_inplace", [x], [x])

    def backward(x, dy, dx):
        return apply(f"{op_type}_backward", [x, dy], [dx])

    forward.__doc__ = f"y = {op_type}(x), a new tensor named `name`."
    inplace.__doc__ = f"x = {op_type}(x) in place."
    backward.__doc__ = f"dx += {op_type}'(x) * dy."
    return forward, inplace, backward


gelu, gelu_inplace, gelu_backward = _unary("gelu")

gelutanh, gelutanh_inplace, gelutanh_backward = _unary("gelutanh")

relu, relu_inplace, relu_backward = _unary("relu")

silu, silu_inplace, silu_backward = _unary("silu")

sqrt, sqrt_inplace, sqrt_backward = _unary("sqrt")

tanh, tanh_inplace, tanh_backward = _unary("tanh")

sigmoid, sigmoid_inplace, sigmoid_backward = _unary("sigmoid")


def add(alpha, x, beta, y, name):
    """z = alpha*x + beta*y."""
    return apply("add", [x, y], [name], alpha=alpha, beta=beta)


def add_inplace(alpha, x, beta, y):
    """y = alpha*x + beta*y."""
    return apply("add_inplace", [x, y], [y], alpha=alpha, beta=beta)


def multiply(x, y, name, alpha=1.0):
    """z = alpha*x*y."""
    return apply("multiply", [x, y], [name], alpha=alpha)


def multiply_inplace(x, y, alpha=1.0):
    """y = alpha*x*y."""
    return apply("multiply_inplace", [x, y], [y], alpha=alpha)


def scale(x, name, alpha=1.0):
    """y = alpha*x."""
    return apply("scale", [x], [name], alpha=alpha)


def scale_inplace(x, alpha=1.0):
    """x = alpha*x."""
    return apply("scale_inplace", [x], [x], alpha=alpha)


def sub(x, y, name):
    """z = x - y."""
    return apply("sub", [x, y], [name])


def div(x, y, name):
    """z = x / y."""
    return apply("div", [x, y], [name])


def hypot(alpha, x, beta, y, name):
    """z = hypot(alpha*x, beta*y) = sqrt((alpha*x)^2 + (beta*y)^2) (NNTile's hypot)."""
    return apply("hypot", [x, y], [name], alpha=alpha, beta=beta)


def hypot_inplace(alpha, x, beta, y):
    """y = hypot(alpha*x, beta*y)."""
    return apply("hypot_inplace", [x, y], [y], alpha=alpha, beta=beta)


def hypot_backward(x, z, grad_z, grad_x, alpha=1.0):
    """grad_x += alpha^2 * x / z * grad_z where z = hypot(alpha*x, ...) (0 where z == 0)."""
    return apply("hypot_backward", [x, z, grad_z], [grad_x], alpha=alpha)


def hypot_scalar_inverse(eps, alpha, x):
    """x = 1 / hypot(alpha*x, eps), in place (NNTile's hypot_scalar_inverse)."""
    return apply("hypot_scalar_inverse", [x], [x], eps=eps, alpha=alpha)


def pow(x, name, alpha=1.0, exp=1.0):  # noqa: A001 - NNTile's name
    """y = alpha * x**exp."""
    return apply("pow", [x], [name], alpha=alpha, exp=exp)


def pow_inplace(x, alpha=1.0, exp=1.0):
    """x = alpha * x**exp."""
    return apply("pow_inplace", [x], [x], alpha=alpha, exp=exp)


def pow_backward(x, dy, dx, alpha=1.0, exp=1.0):
    """dx += alpha * exp * x**(exp - 1) * dy."""
    return apply("pow_backward", [x, dy], [dx], alpha=alpha, exp=exp)


# -- utility -------------------------------------------------------------------
def clear(x):
    """x = 0."""
    return apply("clear", [], [x])


def fill(x, value=0.0):
    """x = value everywhere."""
    return apply("fill", [], [x], value=value)


def add_scalar(x, value=1):
    """x += value (used for step counters)."""
    return apply("add_scalar", [], [x], value=value)


def copy(x, y):
    """y = x; y may be a name (a new tensor) or an existing tensor."""
    return apply("copy", [x], [y])


def cast(x, dtype, name):
    """y = x converted to `dtype`, the only dtype conversion."""
    return apply("cast", [x], [name], dtype=dtype)
