"""xp-generic kernels of the slice ops: a tensor x and its slices along `axis` (x's
shape with that axis removed): log-space reductions. The sums along an
axis (sum_slice, sumprod_slice) are rules of rules_reduce.py (ArrayReduction evaluates
them), the ops that broadcast a slice back formulas of rules_broadcast.py
(ArrayBroadcast), the masks rules of rules_indexed.py (ArrayIndexed); add_slice's body
here is the cuda table's entry only (cuda.py).

Part of generic.table. Arrays only: never imports nntile_spmd, mpi4py, numba or cupy.
Nothing here synchronizes a CuPy stream.
"""

import math

from .generic_common import store


def add_slice(xp, s, x, z, *, axis, alpha=1.0, beta=1.0):
    """z = alpha * s (broadcast along `axis`) + beta*x (x is not read when beta == 0).

    The cuda table's add_slice: CuPy's fused store is one launch where the rule's array
    expressions (rules_broadcast.py, the reference's add_slice) make three; same numerics."""
    store(z, xp.expand_dims(s, axis), beta, x, alpha)


# ---------------------------------------------------------------- log space
# -inf is an entry that takes no part (a masked attention score): a slice of all
# -inf has logsumexp -inf, and merging -inf with -inf stays -inf, never nan. CuPy's
# own logaddexp computes fabs(a - b), which is nan for two -inf, hence _logaddexp.


def _log(coefficient):
    """log of a non-negative coefficient (alpha, beta of the merges); log(0) = -inf."""
    return math.log(coefficient) if coefficient > 0 else -math.inf


def _finite_or_zero(xp, top):
    """The shift subtracted before exp: the max where finite, else 0 (no inf - inf)."""
    return xp.where(xp.isfinite(top), top, 0)


def _logaddexp(xp, a, b):
    """log(exp(a) + exp(b)), elementwise; two -inf give -inf, never nan."""
    top = xp.maximum(a, b)
    shift = _finite_or_zero(xp, top)
    return xp.where(xp.isfinite(top), shift + xp.log1p(xp.exp(xp.minimum(a, b) - shift)), top)


def logsumexp(xp, x, y, *, axis, beta=0.0):
    """y = log(exp(lse) + beta*exp(y)), lse = log(sum(exp(x))) along `axis` (dropped).

    beta == 0: y = lse, y not read; beta == 1: logaddexp(y, lse), which merges the
    partial results of an axis split over tiles.
    """
    top = x.max(axis=axis)
    finite = xp.isfinite(top)
    shift = _finite_or_zero(xp, top)
    total = xp.exp(x - xp.expand_dims(shift, axis)).sum(axis=axis)
    lse = xp.where(finite, shift + xp.log(xp.where(finite, total, 1)), top)
    y[...] = lse if beta == 0.0 else _logaddexp(xp, lse, y + _log(beta))


def logsumexp_merge(xp, x, y, z, *, alpha=1.0, beta=1.0):
    """z = log(alpha*exp(x) + beta*exp(y)): the plan's merge of two partial logsumexps
    (called like add; y is not read when beta == 0)."""
    scaled = x + _log(alpha) if alpha != 1.0 else x
    z[...] = scaled if beta == 0.0 else _logaddexp(xp, scaled, y + _log(beta))

