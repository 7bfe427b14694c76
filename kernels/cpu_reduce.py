"""Numba reductions, fiber broadcasts and transposes of the cpu table.

Arrays only: never imports nntile_spmd, mpi4py or cupy. Each wrapper folds its tile
into a fixed-rank F-order view (free for F-contiguous tiles) so one compiled
specialization per dtype serves every tile rank. Sums accumulate in float64.
fp16 falls back to the NumPy reference.
"""

import math

import numpy as np
from numba import njit

from . import reference
from .cpu_fp16 import F16
from .layout import fiber_folds, fold


@njit(cache=True)
def _sum(x, y, alpha, beta):
    total = 0.0
    for i in range(x.size):
        total += x[i]
    y[0] = alpha * total if beta == 0.0 else alpha * total + beta * y[0]


@njit(cache=True)
def _sum_fiber(x, y, alpha, beta):
    m, n, k, batch = x.shape
    total = np.empty(n)
    for b in range(batch):
        total[:] = 0.0
        # Visit x in storage order; one running sum per fiber element.
        for p in range(k):
            for j in range(n):
                for i in range(m):
                    total[j] += x[i, j, p, b]
        for j in range(n):
            y[j, b] = alpha * total[j] if beta == 0.0 else alpha * total[j] + beta * y[j, b]


@njit(cache=True)
def _add_fiber(x, y, z, alpha, beta):
    m, n, k, batch = z.shape
    a, c = z.dtype.type(alpha), z.dtype.type(beta)
    for b in range(batch):
        for p in range(k):
            for j in range(n):
                value = a * x[j, b]
                if beta == 0.0:  # y may be garbage (or z itself)
                    for i in range(m):
                        z[i, j, p, b] = value
                else:
                    for i in range(m):
                        z[i, j, p, b] = value + c * y[i, j, p, b]


@njit(cache=True)
def _transpose(x, y, alpha):
    m, n = x.shape
    a = y.dtype.type(alpha)
    block = 32  # cache blocking: x is read with stride m, y written contiguously
    for i0 in range(0, m, block):
        for j0 in range(0, n, block):
            for i in range(i0, min(i0 + block, m)):
                for j in range(j0, min(j0 + block, n)):
                    y[j, i] = a * x[i, j]


def sum(x, y, *, alpha=1.0, beta=0.0):  # noqa: A001 - the kernel's name in every table
    """y (0-d) = alpha*sum(x) + beta*y."""
    if x.dtype is F16:
        return reference.sum(x, y, alpha=alpha, beta=beta)
    _sum(x.ravel("K"), y.ravel("K"), float(alpha), float(beta))


def sum_fiber(x, y, *, axis, batch_ndim=0, alpha=1.0, beta=0.0):
    """y[j, batch] = alpha*sum of x over all dims but `axis` and the batch dims + beta*y."""
    if x.dtype is F16:
        return reference.sum_fiber(x, y, axis=axis, batch_ndim=batch_ndim, alpha=alpha, beta=beta)
    m, n, k, batch = fiber_folds(x.shape, axis, batch_ndim)
    _sum_fiber(
        x.reshape((m, n, k, batch), order="F"),
        y.reshape((n, batch), order="F"),
        float(alpha),
        float(beta),
    )


def add_fiber(x, y, z, *, axis, batch_ndim=0, alpha=1.0, beta=0.0):
    """z = alpha*x (broadcast along all dims but `axis` and the batch dims) + beta*y."""
    if x.dtype is F16:
        return reference.add_fiber(
            x, y, z, axis=axis, batch_ndim=batch_ndim, alpha=alpha, beta=beta
        )
    shape4 = fiber_folds(z.shape, axis, batch_ndim)
    _add_fiber(
        x.reshape((shape4[1], shape4[3]), order="F"),
        y.reshape(shape4, order="F"),
        z.reshape(shape4, order="F"),
        float(alpha),
        float(beta),
    )


def transpose(x, y, *, alpha=1.0, ndim):
    """y = alpha * x with its first `ndim` dims moved to the end."""
    if x.dtype is F16:
        return reference.transpose(x, y, alpha=alpha, ndim=ndim)
    m, n = fold(x.shape, (ndim,))
    _transpose(x.reshape((m, n), order="F"), y.reshape((n, m), order="F"), float(alpha))


# ---------------------------------------------------------------- softmax family
# x is folded to (m, n, k) with n the reduced axis; each k-slab keeps m running
# maxima and sums so that x is still visited in storage order.


@njit(cache=True)
def _slab_max(x, p, top):
    top[:] = -np.inf
    for j in range(x.shape[1]):
        for i in range(x.shape[0]):
            top[i] = max(top[i], x[i, j, p])


@njit(cache=True)
def _slab_max_sumexp(x, p, top, total):
    _slab_max(x, p, top)
    total[:] = 0.0
    for j in range(x.shape[1]):
        for i in range(x.shape[0]):
            total[i] += math.exp(x[i, j, p] - top[i])


@njit(cache=True)
def _softmax(x, y):
    m, n, k = x.shape
    top, total = np.empty(m), np.empty(m)
    for p in range(k):
        _slab_max(x, p, top)
        total[:] = 0.0
        for j in range(n):
            for i in range(m):
                e = math.exp(x[i, j, p] - top[i])
                y[i, j, p] = e  # when y is x, x[i, j, p] is never read again
                total[i] += e
        for j in range(n):
            for i in range(m):
                y[i, j, p] /= total[i]


@njit(cache=True)
def _logsumexp(x, y):
    m, k = x.shape[0], x.shape[2]
    top, total = np.empty(m), np.empty(m)
    for p in range(k):
        _slab_max_sumexp(x, p, top, total)
        for i in range(m):
            y[i, p] = top[i] + math.log(total[i])


@njit(cache=True)
def _maxsumexp(x, y):
    m, k = x.shape[0], x.shape[2]
    top, total = np.empty(m), np.empty(m)
    for p in range(k):
        _slab_max_sumexp(x, p, top, total)
        for i in range(m):
            y[0, i, p] = top[i]
            y[1, i, p] = total[i]


def softmax(x, y, *, axis):
    """y = exp(x - max) / sum(exp(x - max)) along `axis`."""
    if x.dtype is F16:
        return reference.softmax(x, y, axis=axis)
    shape3 = fold(x.shape, (axis, axis + 1))
    _softmax(x.reshape(shape3, order="F"), y.reshape(shape3, order="F"))


def logsumexp(x, y, *, axis):
    """y = log(sum(exp(x))) along `axis` (the axis is dropped), computed stably."""
    if x.dtype is F16:
        return reference.logsumexp(x, y, axis=axis)
    m, n, k = fold(x.shape, (axis, axis + 1))
    _logsumexp(x.reshape((m, n, k), order="F"), y.reshape((m, k), order="F"))


def maxsumexp(x, y, *, axis):
    """y[0] = max along `axis`, y[1] = sum(exp(x - max)) along `axis`."""
    if x.dtype is F16:
        return reference.maxsumexp(x, y, axis=axis)
    m, n, k = fold(x.shape, (axis, axis + 1))
    _maxsumexp(x.reshape((m, n, k), order="F"), y.reshape((2, m, k), order="F"))
