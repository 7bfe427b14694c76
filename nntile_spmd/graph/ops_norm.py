"""Graph layer: builders of the fiber products and pow, and the layer_norm composite
made of them and the slice ops; re-exported by `nntile_spmd.ops`.
"""

from __future__ import annotations

import numbers

from .apply import apply
from .dtypes import FLOAT_DTYPES
from .ops_slice import add_slice, multiply_slice, sum_slice, sumprod_slice
from .registry import op_error


def multiply_fiber(f, x, name, axis=0, batch_ndim=0, alpha=1.0):
    """z = alpha * f (the fiber of x along `axis`, broadcast) * x."""
    return apply("multiply_fiber", [f, x], [name], axis=axis, batch_ndim=batch_ndim,
                 alpha=alpha)


def sumprod_fiber(x, y, name, axis=0, batch_ndim=0, alpha=1.0, beta=0.0):
    """f = alpha * sum of x*y over all dims but `axis` and the batch dims + beta*f.

    `name` is a new tensor's name, or an existing fiber f to accumulate into (beta != 0).
    """
    return apply("sumprod_fiber", [x, y], [name], axis=axis, batch_ndim=batch_ndim,
                 alpha=alpha, beta=beta)


def sumprod_fiber_backward(fiber_grad, x, grad_y, axis=0, batch_ndim=0, alpha=1.0):
    """grad_y += alpha * fiber_grad (broadcast) * x: the gradient of sumprod_fiber's
    output with respect to its other factor y (and multiply_fiber's dx)."""
    return apply("sumprod_fiber_backward", [fiber_grad, x], [grad_y], axis=axis,
                 batch_ndim=batch_ndim, alpha=alpha)


def pow(x, name, alpha=1.0, exp=1.0):  # noqa: A001 - NNTile's name
    """y = alpha * x**exp."""
    return apply("pow", [x], [name], alpha=alpha, exp=exp)


def pow_inplace(x, alpha=1.0, exp=1.0):
    """x = alpha * x**exp."""
    return apply("pow_inplace", [x], [x], alpha=alpha, exp=exp)


def pow_backward(x, dy, dx, alpha=1.0, exp=1.0):
    """dx += alpha * exp * x**(exp - 1) * dy."""
    return apply("pow_backward", [x, dy], [dx], alpha=alpha, exp=exp)


# -- layer_norm ------------------------------------------------------------------------------
LAYER_NORM_PARTS = ("mean", "centered", "var", "rstd", "normalized", "scaled")


def layer_norm(x, gamma, beta, name, axis=0, eps=1e-5):
    """y = (x - mean) / sqrt(var + eps) * gamma + beta along `axis`, as torch.nn.LayerNorm
    (biased variance, eps inside the sqrt); gamma and beta are [x.shape[axis]].

    Emitted as primitive ops, so the axis may be split over tiles and ranks and
    nt.grad differentiates it through their rules. Intermediates are named
    f"{name}_{part}" for part in LAYER_NORM_PARTS.
    """
    check_norm("layer_norm", x, (gamma, beta), name, axis, eps, LAYER_NORM_PARTS)
    parts = {part: f"{name}_{part}" for part in LAYER_NORM_PARTS}
    inverse_n = 1.0 / x.shape[axis]
    mean = sum_slice(x, parts["mean"], axis, alpha=inverse_n)
    centered = add_slice(-1.0, mean, 1.0, x, parts["centered"], axis)
    # Two passes (center, then square) as torch does: E[x^2] - mean^2 cancels badly.
    var = sumprod_slice(centered, centered, parts["var"], axis, alpha=inverse_n)
    # var += eps in place on the small slice tensor. nt.grad never visits add_scalar
    # (it has no inputs) and a shift has derivative 1, so d/dvar passes through it
    # unchanged; the only reader of var's value is pow's rule, after the shift.
    apply("add_scalar", [], [var], value=eps)
    rstd = pow(var, parts["rstd"], exp=-0.5)
    normalized = multiply_slice(rstd, centered, parts["normalized"], axis)
    scaled = multiply_fiber(gamma, normalized, parts["scaled"], axis)
    return apply("add_fiber", [beta, scaled], [name], axis=axis, batch_ndim=0, alpha=1.0,
                 beta=1.0)


def check_norm(op, x, params, name, axis, eps, parts):
    """The checks layer_norm, rms_norm and batch_norm share; every mistake raises before
    any op is added (the graph is left as is). `params` are the [x.shape[axis]] affine
    tensors (gamma, beta), `parts` the suffixes of the intermediates' names."""
    tensors = (x, *params)
    if x.dtype not in FLOAT_DTYPES:
        raise op_error(op, f"{x.name} must be a floating-point tensor", tensors, TypeError)
    if not isinstance(axis, int) or not 0 <= axis < x.ndim:
        raise op_error(op, f"axis={axis!r} out of range for {x.ndim} dims", tensors)
    size = x.shape[axis]
    if not isinstance(size, int):
        raise op_error(op, f"the normalized axis {axis} must have a concrete size, "
                       f"not the symbol {size!r} (bind it first)", tensors)
    for param in params:
        if param.dtype != x.dtype:
            raise op_error(op, f"{param.name} must have {x.name}'s dtype "
                           "(no implicit casts; use cast)", tensors, TypeError)
        if param.shape != (size,):
            raise op_error(op, f"{param.name} must have shape [{size}] "
                           f"(the size of {x.name}'s axis {axis})", tensors)
    if not isinstance(eps, numbers.Real) or not eps >= 0:
        raise op_error(op, f"eps={eps!r} must be a real number >= 0", tensors)
    taken = [n for n in (name, *(f"{name}_{part}" for part in parts))
             if x.graph.has_tensor(n)]
    if taken:
        raise op_error(op, f"tensor name {taken[0]!r} is already in use", tensors)
