"""Numba kernels of the convolutions for the cpu table (copy_intersection is one NumPy
slice assignment: nntile_kernels.generic_conv.copy_intersection).

Arrays only: never imports nntile_spmd, mpi4py or cupy. Same tap geometry as
generic_conv (tap_rows); numba gets the C-ordered transposed views of the F-ordered
tiles (xt[b, c, j, i] is x[i, j, c, b]), so the innermost loop walks contiguous rows.
fp16 falls back to the NumPy reference.
"""

import numpy as np
from numba import njit

from .cpu_common import fp16_uses_reference
from .generic_conv import tap_rows


def _tap_table(x_shape, c_shape, y_shape, padding, stride, dilation, x_start, c_start,
               y_start):
    """Per tap along w and h: (tap, out lo, out hi, first input row), taps that meet only."""
    tables = []
    for axis in range(2):
        rows = []
        for tap in range(c_shape[axis]):
            found = tap_rows(y_start[axis], y_shape[axis], x_start[axis], x_shape[axis],
                             c_start[axis] + tap, padding[axis], stride[axis], dilation[axis])
            if found is not None:
                rows.append((tap,) + found)
        tables.append(np.array(rows, dtype=np.int64).reshape(-1, 4))
    return tables


@njit(cache=True)
def _forward(xt, ct, yt, alpha, rows, cols, s0, s1):
    """yt[b, o, j, i] += alpha * xt[b, c, x_j, x_i] * ct[o, c, q, p] over the given taps."""
    n_batch, n_in = xt.shape[0], xt.shape[1]
    n_out = yt.shape[1]
    for b in range(n_batch):
        for o in range(n_out):
            for col in cols:
                q, j0, j1, xj0 = col[0], col[1], col[2], col[3]
                for row in rows:
                    p, i0, i1, xi0 = row[0], row[1], row[2], row[3]
                    for c in range(n_in):
                        w = alpha * ct[o, c, q, p]
                        for j in range(j0, j1):
                            xj = xj0 + s1 * (j - j0)
                            for i in range(i0, i1):
                                yt[b, o, j, i] += w * xt[b, c, xj, xi0 + s0 * (i - i0)]


@njit(cache=True)
def _backward_input(dyt, ct, dxt, alpha, rows, cols, s0, s1):
    """dxt[b, c, x_j, x_i] += alpha * dyt[b, o, j, i] * ct[o, c, q, p] over the taps."""
    n_batch, n_in = dxt.shape[0], dxt.shape[1]
    n_out = dyt.shape[1]
    for b in range(n_batch):
        for c in range(n_in):
            for col in cols:
                q, j0, j1, xj0 = col[0], col[1], col[2], col[3]
                for row in rows:
                    p, i0, i1, xi0 = row[0], row[1], row[2], row[3]
                    for o in range(n_out):
                        w = alpha * ct[o, c, q, p]
                        for j in range(j0, j1):
                            xj = xj0 + s1 * (j - j0)
                            for i in range(i0, i1):
                                dxt[b, c, xj, xi0 + s0 * (i - i0)] += w * dyt[b, o, j, i]


@njit(cache=True)
def _backward_weight(xt, dyt, dct, alpha, rows, cols, s0, s1):
    """dct[o, c, q, p] += alpha * sum over b, j, i of xt[b, c, x_j, x_i] * dyt[b, o, j, i]."""
    n_batch, n_in = xt.shape[0], xt.shape[1]
    n_out = dyt.shape[1]
    for o in range(n_out):
        for c in range(n_in):
            for col in cols:
                q, j0, j1, xj0 = col[0], col[1], col[2], col[3]
                for row in rows:
                    p, i0, i1, xi0 = row[0], row[1], row[2], row[3]
                    total = 0.0
                    for b in range(n_batch):
                        for j in range(j0, j1):
                            xj = xj0 + s1 * (j - j0)
                            for i in range(i0, i1):
                                total += xt[b, c, xj, xi0 + s0 * (i - i0)] * dyt[b, o, j, i]
                    dct[o, c, q, p] += alpha * total


def _prepare(out, beta):
    """out = beta * out, never reading out when beta == 0 (then the kernels add into 0)."""
    if beta == 0.0:
        out.fill(0)
    elif beta != 1.0:
        out *= beta


def _taps_after_beta(out, beta, image, kernel, y, geometry):
    """Scale `out` by beta; the tap tables of the taps that meet the image tile, or None."""
    padding, stride, dilation, x_start, c_start, y_start = geometry
    _prepare(out, beta)
    rows, cols = _tap_table(image.shape, kernel.shape, y.shape, padding, stride, dilation,
                            x_start, c_start, y_start)
    return (rows, cols) if len(rows) and len(cols) else None


@fp16_uses_reference(0)
def conv2d_inplace(x, c, y, *, alpha=1.0, beta=0.0, padding, stride, dilation, x_start,
                   c_start, y_start):
    """y = alpha * conv2d(x, c) + beta * y (nntile_kernels.generic_conv)."""
    found = _taps_after_beta(y, beta, x, c, y,
                             (padding, stride, dilation, x_start, c_start, y_start))
    if found is not None:
        rows, cols = found
        _forward(x.T, c.T, y.T, alpha, rows, cols, stride[0], stride[1])


@fp16_uses_reference(0)
def conv2d_bwd_input_inplace(dy, c, dx, *, alpha=1.0, beta=0.0, padding, stride, dilation,
                             x_start, c_start, y_start):
    """dx = alpha * conv2d^T(dy, c) + beta * dx (nntile_kernels.generic_conv)."""
    found = _taps_after_beta(dx, beta, dx, c, dy,
                             (padding, stride, dilation, x_start, c_start, y_start))
    if found is not None:
        rows, cols = found
        _backward_input(dy.T, c.T, dx.T, alpha, rows, cols, stride[0], stride[1])


@fp16_uses_reference(0)
def conv2d_bwd_weight_inplace(x, dy, dc, *, alpha=1.0, beta=0.0, padding, stride, dilation,
                              x_start, c_start, y_start):
    """dc = alpha * (x correlated with dy) + beta * dc (nntile_kernels.generic_conv)."""
    found = _taps_after_beta(dc, beta, x, dc, dy,
                             (padding, stride, dilation, x_start, c_start, y_start))
    if found is not None:
        rows, cols = found
        _backward_weight(x.T, dy.T, dc.T, alpha, rows, cols, stride[0], stride[1])
