"""Numba kernels of the slice reductions (sum_slice, sumprod_slice: a tensor x summed into
its slices along `axis`) and the masks of the cpu table. The slice ops that broadcast a
slice back (add_slice, multiply_slice, sumprod_slice_backward, logsumexp_backward, the
softmax from a logsumexp and its backward) are formulas of rules_broadcast.py, their
loops generated into cpu_rules_broadcast.py over the same folded views.

Arrays only: never imports nntile_spmd, mpi4py or cupy. x is folded to (m, n, k)
around the axis (n its length) and a slice to (m, k); numba gets the C-ordered
transposed views (cpu_common.folded_t), indexed backwards: xt[p, j, i] is x[i, j, p]
and st[p, i] is s[i, p]. Visiting x in storage order keeps m running values per
k-slab. Sums accumulate in float64; fp16 falls back to the NumPy reference.

PERF: with axis 0 (LayerNorm's C in [C, T, B]) m is 1, and a loop over i of length 1
stops LLVM from vectorizing: each reduction has an `m == 1` branch looping over j
instead (as the generated loops do), and sums over j use 8 independent running sums
(cpu_common.row_sum/row_dot), which pipeline where one chain cannot (docs/benchmarks.md,
"Measurements behind code constants").
"""

import numpy as np
from numba import njit

from . import reference
from .cpu_common import F16, folded_t, row_dot, row_sum
from .layout import fold


def slice_views(full, parts, axis):
    """(m, n, k) folded views of the full arrays and (m, k) views of the slices."""
    m, n, k = fold(full[0].shape, (axis, axis + 1))
    return ([folded_t(a, (m, n, k)) for a in full], [folded_t(a, (m, k)) for a in parts])


@njit(cache=True, nogil=True)
def _sumprod_slice(xt, yt, zt, alpha, beta):
    k, n, m = xt.shape
    total = np.empty(m)
    for p in range(k):
        if m == 1:
            total[0] = row_dot(xt[p, :, 0], yt[p, :, 0])
        else:
            total[:] = 0.0
            for j in range(n):
                for i in range(m):
                    total[i] += xt[p, j, i] * yt[p, j, i]
        for i in range(m):
            value = alpha * total[i]
            zt[p, i] = value if beta == 0.0 else value + beta * zt[p, i]  # z may be garbage


@njit(cache=True, nogil=True)
def _mask_scalar(mask, x, y, val):
    # flat F-order views: the mask's dims lead, so x's element b*size + i has mask[i]
    size = mask.size
    value = y.dtype.type(val)
    for b in range(y.size // size):
        for i in range(size):
            y[b * size + i] = x[b * size + i] if mask[i] else value


@njit(cache=True, nogil=True)
def _mask_causal(x, y, val, key_offset, query_offset, in_place):
    # [keys, queries, batch] F-order views: in each column the masked keys are a tail run
    keys, queries, batch = y.shape
    value = y.dtype.type(val)
    for b in range(batch):
        for j in range(queries):
            first = min(max(0, query_offset + j - key_offset + 1), keys)
            if not in_place:
                for i in range(first):
                    y[i, j, b] = x[i, j, b]
            for i in range(first, keys):
                y[i, j, b] = value


def mask_causal(x, y, *, val, key_offset=0, query_offset=0):
    """y = val where key index (dim 0) > query index (dim 1), else x (y may be x)."""
    if x.dtype is F16 or not (x.flags.f_contiguous and y.flags.f_contiguous):
        return reference.mask_causal(x, y, val=val, key_offset=key_offset,
                                     query_offset=query_offset)
    shape = x.shape[:2] + (-1,)
    _mask_causal(x.reshape(shape, order="F"), y.reshape(shape, order="F"), float(val),
                 int(key_offset), int(query_offset), np.may_share_memory(x, y))


def sumprod_slice(x, y, z, *, axis, alpha=1.0, beta=0.0):
    """z = alpha * sum over `axis` of x*y (that axis removed) + beta*z; sums in float64."""
    if x.dtype is F16:
        return reference.sumprod_slice(x, y, z, axis=axis, alpha=alpha, beta=beta)
    (xt, yt), (zt,) = slice_views((x, y), (z,), axis)
    _sumprod_slice(xt, yt, zt, float(alpha), float(beta))


def mask_scalar(mask, x, y, *, val, batch_ndim=0):
    """y = x where mask, else val; mask has x's leading dims, broadcast over the batch dims."""
    if x.dtype is F16:
        return reference.mask_scalar(mask, x, y, val=val, batch_ndim=batch_ndim)
    _mask_scalar(mask.ravel("K"), x.ravel("K"), y.ravel("K"), float(val))


# -------------------------------------------------- sum_slice, add_slice, multiply_slice


@njit(cache=True, nogil=True)
def _sum_slice(xt, st, alpha, beta):
    k, n, m = xt.shape
    total = np.empty(m)
    for p in range(k):
        if m == 1:
            total[0] = row_sum(xt[p, :, 0])
        else:
            total[:] = 0.0
            for j in range(n):
                for i in range(m):
                    total[i] += xt[p, j, i]
        for i in range(m):
            value = alpha * total[i]
            st[p, i] = value if beta == 0.0 else value + beta * st[p, i]  # s may be garbage


def sum_slice(x, s, *, axis, alpha=1.0, beta=0.0):
    """s = alpha * sum over `axis` of x (that axis removed) + beta*s; sums in float64."""
    if x.dtype is F16:
        return reference.sum_slice(x, s, axis=axis, alpha=alpha, beta=beta)
    (xt,), (st,) = slice_views((x,), (s,), axis)
    _sum_slice(xt, st, float(alpha), float(beta))

