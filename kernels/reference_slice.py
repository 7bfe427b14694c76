"""NumPy reference kernels of the slice ops: a tensor x and its slices along `axis`
(x's shape with that axis removed), broadcast back along the axis where needed; and
mask_scalar, whose mask is broadcast over trailing batch dims.

Part of the reference table (reference.py imports these). Arrays only: imports NumPy,
never nntile_spmd, mpi4py, numba or cupy. Same calling convention as reference.py.
"""

import math

import numpy as np


def _store(out, value, beta, previous):
    """out = value + beta*previous, never reading `previous` when beta == 0 (may be garbage)."""
    if beta == 0.0:
        out[...] = value
    else:
        out[...] = value + beta * previous


def _wide(dtype):
    """Dtype that products are carried in: fp16 is widened to fp32 (as in reference.py)."""
    return np.float32 if dtype == np.float16 else dtype


def sumprod_slice(x, y, z, *, axis, alpha=1.0, beta=0.0):
    """z = alpha * sum over `axis` of x*y (that axis removed) + beta*z; sums in float64."""
    total = np.multiply(x, y, dtype=_wide(x.dtype)).sum(axis=axis, dtype=np.float64)
    _store(z, alpha * total, beta, z)


def sumprod_slice_backward(s, x, dx, *, axis, alpha=1.0):
    """dx += alpha * s (broadcast along `axis`) * x."""
    dx += alpha * np.expand_dims(s, axis) * x


def sum_slice(x, s, *, axis, alpha=1.0, beta=0.0):
    """s = alpha * sum over `axis` of x (that axis removed) + beta*s; sums in float64."""
    _store(s, alpha * x.sum(axis=axis, dtype=np.float64), beta, s)


def add_slice(s, x, z, *, axis, alpha=1.0, beta=1.0):
    """z = alpha * s (broadcast along `axis`) + beta*x (x is not read when beta == 0)."""
    _store(z, alpha * np.expand_dims(s, axis), beta, x)


def multiply_slice(s, x, z, *, axis, alpha=1.0):
    """z = alpha * s (broadcast along `axis`) * x."""
    z[...] = alpha * np.expand_dims(s, axis) * x


# ---------------------------------------------------------------- log space
# -inf is an entry that takes no part (a masked attention score): a slice of all
# -inf has logsumexp -inf, and merging -inf with -inf stays -inf, never nan.


def _log(coefficient):
    """log of a non-negative coefficient (alpha, beta of the merges); log(0) = -inf."""
    return math.log(coefficient) if coefficient > 0 else -math.inf


def _finite_or_zero(top):
    """The shift subtracted before exp: the max where finite, else 0 (no inf - inf)."""
    return np.where(np.isfinite(top), top, 0.0)


def logsumexp(x, y, *, axis, beta=0.0):
    """y = log(exp(lse) + beta*exp(y)), lse = log(sum(exp(x))) along `axis` (dropped).

    beta == 0: y = lse, y not read; beta == 1: logaddexp(y, lse), which merges the
    partial results of an axis split over tiles.
    """
    top = x.max(axis=axis)
    shift = _finite_or_zero(top)
    with np.errstate(divide="ignore"):  # log(0) where a whole slice is -inf
        lse = shift + np.log(np.exp(x - np.expand_dims(shift, axis)).sum(axis=axis))
    lse = np.where(np.isfinite(top), lse, top)
    y[...] = lse if beta == 0.0 else np.logaddexp(lse, y + _log(beta))


def logsumexp_merge(x, y, z, *, alpha=1.0, beta=1.0):
    """z = log(alpha*exp(x) + beta*exp(y)): the plan's merge of two partial logsumexps
    (called like add; y is not read when beta == 0)."""
    scaled = x + _log(alpha)
    z[...] = scaled if beta == 0.0 else np.logaddexp(scaled, y + _log(beta))


def logsumexp_backward(x, y, dy, dx, *, axis):
    """dx += exp(x - y) * dy, y and dy broadcast along `axis` (y = logsumexp(x));
    a -inf entry of x gets 0, also where its whole slice is -inf."""
    y_full = np.expand_dims(_finite_or_zero(y), axis)
    dx += np.exp(x - y_full) * np.expand_dims(dy, axis)


def softmax_from_logsumexp(lse, x, y, *, axis):
    """y = exp(x - lse), lse broadcast along `axis` (the softmax when lse = logsumexp(x));
    a -inf entry of x gives 0 (a slice of all -inf, whose lse is -inf, gives nan as
    softmax does)."""
    y[...] = np.exp(x - np.expand_dims(lse, axis))


def softmax_from_logsumexp_backward(y, dy, d, dx, *, axis):
    """dx += y * (dy - d), d broadcast along `axis` (d = sumprod_slice(y, dy))."""
    dx += y * (dy - np.expand_dims(d, axis))


# ---------------------------------------------------------------- masks


def mask_scalar(mask, x, y, *, val, batch_ndim=0):
    """y = x where mask, else val; the bool mask has x's leading dims and is broadcast
    over its `batch_ndim` trailing dims (y may be x itself: NNTile's in-place form)."""
    keep = mask.reshape(mask.shape + (1,) * batch_ndim)
    y[...] = np.where(keep, x, val)
