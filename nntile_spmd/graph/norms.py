"""Graph layer, norms family: layer_norm, rms_norm and batch_norm are composites of
the reductions' and elementwise ops (no entry of their own: their gradients come from
their parts' rules), re-exported by `nntile_spmd.ops`.

batch_norm is training mode, as torch.nn.BatchNorm computes its output: every channel
(the dim `axis`) is normalized with the mean and biased variance of its entries over all
the other dims, so those dims may be split over tiles and ranks (DDP's batch split).
"""

from __future__ import annotations

import math
import numbers

from .apply import apply
from .dtypes import FLOAT_DTYPES
from .elementwise.ops import pow  # noqa: A004 - the op, not the builtin
from .reductions.ops import (add_slice, multiply_fiber, multiply_slice, sum_slice,
                             sumprod_fiber, sumprod_slice)
from .registry import op_error

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


RMS_NORM_PARTS = ("meansq", "rstd", "normalized")


def rms_norm(x, gamma, name, axis=0, eps=1e-6):
    """y = x / sqrt(mean(x**2) + eps) * gamma along `axis`, as transformers' LlamaRMSNorm
    (its fp32 upcast aside: here the arithmetic is in x's dtype); gamma is [x.shape[axis]].

    Emitted as primitive ops (sumprod_slice, add_scalar, pow, multiply_slice,
    multiply_fiber), so the axis may be split over tiles and ranks and nt.grad
    differentiates it through their rules. Intermediates are named f"{name}_{part}"
    for part in RMS_NORM_PARTS.
    """
    check_norm("rms_norm", x, (gamma,), name, axis, eps, RMS_NORM_PARTS)
    parts = {part: f"{name}_{part}" for part in RMS_NORM_PARTS}
    meansq = sumprod_slice(x, x, parts["meansq"], axis, alpha=1.0 / x.shape[axis])
    # in place on the small slice: a shift has derivative 1, so pow's rule, which reads
    # the shifted value, is all the backward pass needs (as in layer_norm)
    apply("add_scalar", [], [meansq], value=eps)
    rstd = pow(meansq, parts["rstd"], exp=-0.5)
    normalized = multiply_slice(rstd, x, parts["normalized"], axis)
    return multiply_fiber(gamma, normalized, name, axis)


BATCH_NORM_PARTS = ("mean", "centered", "var", "rstd", "normalized", "scaled")


def batch_norm(x, gamma, beta, name, axis=0, eps=1e-5):
    """y = (x - mean) / sqrt(var + eps) * gamma + beta per channel along `axis`, with mean
    and biased var over every other dim; gamma and beta are [x.shape[axis]].

    Intermediates are named f"{name}_{part}" for part in BATCH_NORM_PARTS (the batch
    statistics are {name}_mean and {name}_var, var + eps after the op).
    """
    check_batch_norm(x, gamma, beta, name, axis, eps)
    parts = {part: f"{name}_{part}" for part in BATCH_NORM_PARTS}
    inverse_n = x.shape[axis] / math.prod(x.shape)   # 1 / (elements per channel)
    mean = apply("sum_fiber", [x], [parts["mean"]], axis=axis, batch_ndim=0, redux=0,
                 alpha=inverse_n, beta=0.0)
    centered = apply("add_fiber", [mean, x], [parts["centered"]], axis=axis, batch_ndim=0,
                     alpha=-1.0, beta=1.0)
    # two passes (center, then square), as layer_norm: E[x^2] - mean^2 cancels badly
    var = sumprod_fiber(centered, centered, parts["var"], axis, alpha=inverse_n)
    # += eps in place on the [C] fiber: add_scalar has no inputs, so nt.grad never
    # visits it, and pow's rule (the only reader of var) runs after the shift
    apply("add_scalar", [], [var], value=eps)
    rstd = pow(var, parts["rstd"], exp=-0.5)
    normalized = multiply_fiber(rstd, centered, parts["normalized"], axis)
    scaled = multiply_fiber(gamma, normalized, parts["scaled"], axis)
    return apply("add_fiber", [beta, scaled], [name], axis=axis, batch_ndim=0, alpha=1.0,
                 beta=1.0)


def check_batch_norm(x, gamma, beta, name, axis, eps):
    """Every mistake raises before any op is added (the graph is left as is)."""
    check_norm("batch_norm", x, (gamma, beta), name, axis, eps, BATCH_NORM_PARTS)
    if x.ndim < 2:
        raise op_error("batch_norm", f"{x.name} needs a dim besides the channel axis to "
                       "take statistics over", (x, gamma, beta))
    if not all(isinstance(size, int) for size in x.shape):
        raise op_error("batch_norm", f"{x.name} must have concrete sizes (bind its "
                       "symbols first): the statistics divide by the count", (x, gamma, beta))
