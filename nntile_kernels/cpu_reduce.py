"""Numba softmax family and transposes of the cpu table (sum and sum_fiber are rules of
rules_reduce.py, their loops generated into cpu_rules_reduce.py; add_fiber, the fiber
broadcast, a rule of rules_broadcast.py, its loop in cpu_rules_broadcast.py).

Arrays only: never imports nntile_spmd, mpi4py or cupy. Each wrapper folds its tile
to a fixed rank and hands numba the C-ordered transpose (cpu_common.folded_t), so one
compiled specialization per dtype serves every tile shape; kernels index backwards.
Sums accumulate in float64. fp16 falls back to the NumPy reference.
"""

import math

import numpy as np
from numba import njit

from . import reference
from .cpu_common import F16, folded_t, row_max, row_sum
from .cpu_fastmath import fast_exp
from .layout import fold


@njit(cache=True, nogil=True)
def _transpose(xt, yt, alpha):
    n, m = xt.shape  # x is (m, n), y is (n, m)
    a = yt.dtype.type(alpha)
    block = 32  # cache blocking: one side is always read or written with a stride
    if m < block:
        # few rows (attention's heads moved last): x is read in storage order and y
        # written as m sequential streams; the blocked loops below would run an
        # m-long inner loop per block, which is slower for few rows
        for j in range(n):
            for i in range(m):
                yt[i, j] = a * xt[j, i]
        return
    for j0 in range(0, n, block):
        for i0 in range(0, m, block):
            for j in range(j0, min(j0 + block, n)):
                for i in range(i0, min(i0 + block, m)):
                    yt[i, j] = a * xt[j, i]


def transpose(x, y, *, alpha=1.0, ndim):
    """y = alpha * x with its first `ndim` dims moved to the end."""
    if x.dtype is F16:
        return reference.transpose(x, y, alpha=alpha, ndim=ndim)
    m, n = fold(x.shape, (ndim,))
    _transpose(folded_t(x, (m, n)), folded_t(y, (n, m)), float(alpha))


# ---------------------------------------------------------------- softmax family
# x is folded to (m, n, k) with n the reduced axis; each k-slab keeps m running
# maxima and sums so that x is still visited in storage order.


@njit(cache=True, nogil=True)
def _slab_max(xt, p, top):
    top[:] = -np.inf
    for j in range(xt.shape[1]):
        for i in range(xt.shape[2]):
            top[i] = max(top[i], xt[p, j, i])


@njit(cache=True, nogil=True, error_model="numpy")
def _slab_max_sumexp(xt, p, top, total):
    if xt.shape[2] == 1:
        # PERF: axis 0 (attention's key axis, the loss's classes): one contiguous run;
        # the exps vectorise into a scratch row summed by row_sum's 8 chains
        column = xt[p].reshape(xt.shape[1])   # C-contiguous (xt[p, :, 0] is typed strided)
        peak = row_max(column)
        exps = np.empty(column.size)
        for j in range(column.size):
            exps[j] = fast_exp(column[j] - peak)
        top[0], total[0] = peak, row_sum(exps)
        return
    _slab_max(xt, p, top)
    total[:] = 0.0
    for j in range(xt.shape[1]):
        for i in range(xt.shape[2]):
            total[i] += fast_exp(xt[p, j, i] - top[i])


@njit(cache=True, nogil=True, error_model="numpy")
def _softmax(xt, yt):
    k, n, m = xt.shape
    top, total = np.empty(m, xt.dtype), np.empty(m)   # top in the tile dtype: fast_exp
    for p in range(k):
        _slab_max(xt, p, top)
        total[:] = 0.0
        for j in range(n):
            for i in range(m):
                e = fast_exp(xt[p, j, i] - top[i])
                yt[p, j, i] = e  # when y is x, x[i, j, p] is never read again
                total[i] += e
        for j in range(n):
            for i in range(m):
                yt[p, j, i] /= total[i]


@njit(cache=True, nogil=True)
def _log_add(a, b):
    """log(exp(a) + exp(b)); two -inf give -inf (never nan), +inf wins."""
    top = max(a, b)
    if math.isinf(top):
        return top
    return top + math.log1p(math.exp(min(a, b) - top))


@njit(cache=True, nogil=True, error_model="numpy")
def _logsumexp(xt, yt, beta, log_beta):
    k, m = xt.shape[0], xt.shape[2]  # y is (m, k)
    top, total = np.empty(m, xt.dtype), np.empty(m)
    for p in range(k):
        _slab_max_sumexp(xt, p, top, total)  # total is nan where top is infinite
        for i in range(m):
            value = top[i] if math.isinf(top[i]) else top[i] + math.log(total[i])
            yt[p, i] = value if beta == 0.0 else _log_add(value, yt[p, i] + log_beta)


@njit(cache=True, nogil=True)
def _logsumexp_merge(x, y, z, log_alpha, beta, log_beta):
    for i in range(z.size):
        value = x[i] + log_alpha
        z[i] = value if beta == 0.0 else _log_add(value, y[i] + log_beta)


@njit(cache=True, nogil=True)
def _maxsumexp(xt, yt):
    k, m = xt.shape[0], xt.shape[2]  # y is (2, m, k)
    top, total = np.empty(m), np.empty(m)
    for p in range(k):
        _slab_max_sumexp(xt, p, top, total)
        for i in range(m):
            yt[p, i, 0] = top[i]
            yt[p, i, 1] = total[i]


def softmax(x, y, *, axis):
    """y = exp(x - max) / sum(exp(x - max)) along `axis`."""
    if x.dtype is F16:
        return reference.softmax(x, y, axis=axis)
    shape3 = fold(x.shape, (axis, axis + 1))
    _softmax(folded_t(x, shape3), folded_t(y, shape3))


def _log(coefficient):
    return math.log(coefficient) if coefficient > 0 else -math.inf


def logsumexp(x, y, *, axis, beta=0.0):
    """y = log(exp(lse) + beta*exp(y)), lse = log(sum(exp(x))) along `axis` (dropped);
    a slice of all -inf gives -inf."""
    if x.dtype is F16:
        return reference.logsumexp(x, y, axis=axis, beta=beta)
    m, n, k = fold(x.shape, (axis, axis + 1))
    _logsumexp(folded_t(x, (m, n, k)), folded_t(y, (m, k)), float(beta), _log(beta))


def logsumexp_merge(x, y, z, *, alpha=1.0, beta=1.0):
    """z = log(alpha*exp(x) + beta*exp(y)), merging two partial logsumexps."""
    if x.dtype is F16:
        return reference.logsumexp_merge(x, y, z, alpha=alpha, beta=beta)
    _logsumexp_merge(x.ravel("K"), y.ravel("K"), z.ravel("K"), _log(alpha), float(beta),
                     _log(beta))


def maxsumexp(x, y, *, axis):
    """y[0] = max along `axis`, y[1] = sum(exp(x - max)) along `axis`."""
    if x.dtype is F16:
        return reference.maxsumexp(x, y, axis=axis)
    m, n, k = fold(x.shape, (axis, axis + 1))
    _maxsumexp(folded_t(x, (m, n, k)), folded_t(y, (2, m, k)))
