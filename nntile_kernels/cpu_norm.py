"""Numba kernels of the fiber products (LayerNorm's primitives) of the cpu table; pow,
LayerNorm's other primitive, is a rule of rules.py (cpu_rules_params.py).

Arrays only: never imports nntile_spmd, mpi4py or cupy. A full tile is folded to
(m, n, k, batch) around the fiber axis n (layout.fiber_folds) and a fiber to
(n, batch); numba gets the C-ordered transposed views (cpu_common.folded_t), indexed
backwards, so x is visited in storage order. Sums accumulate in float64; fp16 falls
back to the NumPy reference (nntile_kernels.reference).

PERF: LayerNorm's gamma is the fiber along axis 0, where m is 1: the kernels then loop
over j innermost (a length-1 loop over i stops vectorization), and sums over i use
cpu_common.row_dot.
"""

import numpy as np
from numba import njit

from . import reference
from .cpu_common import F16, folded_t, row_dot
from .layout import fiber_folds


def fiber_views(full, fiber, axis, batch_ndim):
    """(m, n, k, batch) views of the full arrays and the (n, batch) view of the fiber."""
    shape4 = fiber_folds(full[0].shape, axis, batch_ndim)
    return [folded_t(a, shape4) for a in full], folded_t(fiber, (shape4[1], shape4[3]))


@njit(cache=True, nogil=True)
def _multiply_fiber(ft, xt, zt, alpha):
    batch, k, n, m = zt.shape
    a = zt.dtype.type(alpha)
    for b in range(batch):
        for p in range(k):
            if m == 1:
                for j in range(n):
                    zt[b, p, j, 0] = a * ft[b, j] * xt[b, p, j, 0]
                continue
            for j in range(n):
                value = a * ft[b, j]
                for i in range(m):
                    zt[b, p, j, i] = value * xt[b, p, j, i]


@njit(cache=True, nogil=True)
def _sumprod_fiber_backward(ft, xt, dxt, alpha):
    batch, k, n, m = dxt.shape
    a = dxt.dtype.type(alpha)
    for b in range(batch):
        for p in range(k):
            if m == 1:
                for j in range(n):
                    dxt[b, p, j, 0] += a * ft[b, j] * xt[b, p, j, 0]
                continue
            for j in range(n):
                value = a * ft[b, j]
                for i in range(m):
                    dxt[b, p, j, i] += value * xt[b, p, j, i]


@njit(cache=True, nogil=True)
def _sumprod_fiber(xt, yt, ft, alpha, beta):
    batch, k, n, m = xt.shape
    total = np.empty(n)
    for b in range(batch):
        total[:] = 0.0
        for p in range(k):
            if m == 1:   # one running sum per j: independent, so the loop over j vectorizes
                for j in range(n):
                    total[j] += xt[b, p, j, 0] * yt[b, p, j, 0]
                continue
            for j in range(n):
                total[j] += row_dot(xt[b, p, j], yt[b, p, j])
        for j in range(n):
            value = alpha * total[j]
            ft[b, j] = value if beta == 0.0 else value + beta * ft[b, j]  # f may be garbage


def multiply_fiber(f, x, z, *, axis, batch_ndim=0, alpha=1.0):
    """z = alpha * f (broadcast along all dims but `axis` and the batch dims) * x."""
    if x.dtype is F16:
        return reference.multiply_fiber(f, x, z, axis=axis, batch_ndim=batch_ndim,
                                             alpha=alpha)
    (xt, zt), ft = fiber_views((x, z), f, axis, batch_ndim)
    _multiply_fiber(ft, xt, zt, float(alpha))


def sumprod_fiber(x, y, f, *, axis, batch_ndim=0, alpha=1.0, beta=0.0):
    """f = alpha * sum of x*y over all dims but `axis` and the batch dims + beta*f."""
    if x.dtype is F16:
        return reference.sumprod_fiber(x, y, f, axis=axis, batch_ndim=batch_ndim,
                                            alpha=alpha, beta=beta)
    (xt, yt), ft = fiber_views((x, y), f, axis, batch_ndim)
    _sumprod_fiber(xt, yt, ft, float(alpha), float(beta))


def sumprod_fiber_backward(f, x, dx, *, axis, batch_ndim=0, alpha=1.0):
    """dx += alpha * f (broadcast) * x."""
    if x.dtype is F16:
        return reference.sumprod_fiber_backward(f, x, dx, axis=axis,
                                                     batch_ndim=batch_ndim, alpha=alpha)
    (xt, dxt), ft = fiber_views((x, dx), f, axis, batch_ndim)
    _sumprod_fiber_backward(ft, xt, dxt, float(alpha))
