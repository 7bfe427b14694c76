"""The convolutions of the cpu table: numba gathers the input under every kernel tap
(im2col) or scatters it back (col2im), BLAS multiplies the patch matrix by the kernel
(copy_intersection is one NumPy slice assignment: generic_conv.copy_intersection).

Arrays only: never imports nntile_spmd, mpi4py or cupy. Same tap geometry as
generic_conv (tap_rows); numba gets the C-ordered transposed views of the F-ordered
tiles (xt[b, c, j, i] is x[i, j, c, b]). fp16 falls back to the NumPy reference.
Why not direct loops (one multiply-add per tap, channel and position): on small
feature maps their inner loops span a few pixels, while the patch product spans
channels and batch (benchmarks/bench_conv_kernels.py times this against the reference).
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


@njit(cache=True, nogil=True)
def _im2col(xt, rows, cols, s0, s1, patches):
    """patches[b, j, i, c, q, p] = xt[b, c, x_j, x_i]: the input under every tap of every
    output position (entries of taps outside the input tile stay as they were: 0)."""
    for b in range(xt.shape[0]):
        for c in range(xt.shape[1]):
            for col in cols:
                q, j0, j1, xj0 = col[0], col[1], col[2], col[3]
                for row in rows:
                    p, i0, i1, xi0 = row[0], row[1], row[2], row[3]
                    for j in range(j0, j1):
                        xj = xj0 + s1 * (j - j0)
                        for i in range(i0, i1):
                            patches[b, j, i, c, q, p] = xt[b, c, xj, xi0 + s0 * (i - i0)]


@njit(cache=True, nogil=True)
def _col2im(patches, rows, cols, s0, s1, xt):
    """xt[b, c, x_j, x_i] += patches[b, j, i, c, q, p]: _im2col's adjoint."""
    for b in range(xt.shape[0]):
        for c in range(xt.shape[1]):
            for col in cols:
                q, j0, j1, xj0 = col[0], col[1], col[2], col[3]
                for row in rows:
                    p, i0, i1, xi0 = row[0], row[1], row[2], row[3]
                    for j in range(j0, j1):
                        xj = xj0 + s1 * (j - j0)
                        for i in range(i0, i1):
                            xt[b, c, xj, xi0 + s0 * (i - i0)] += patches[b, j, i, c, q, p]


def _patch_matrix(x, c_shape, y_shape, rows, cols, stride):
    """[(N, H_out, W_out), (C_in, K_h, K_w)] matrix of the input under every tap."""
    n_batch, n_in = x.shape[3], x.shape[2]
    patches = np.zeros((n_batch, y_shape[1], y_shape[0], n_in, c_shape[1], c_shape[0]),
                       dtype=x.dtype)
    _im2col(x.T, rows, cols, stride[0], stride[1], patches)
    return patches.reshape(n_batch * y_shape[1] * y_shape[0], -1)


def _kernel_matrix(c):
    """[C_out, (C_in, K_h, K_w)] view of a kernel tile (c.T is C-ordered)."""
    return c.T.reshape(c.shape[3], -1)


def _rows_matrix(y):
    """[(N, H_out, W_out), C_out] copy of an output tile."""
    return y.T.transpose(0, 2, 3, 1).reshape(-1, y.shape[2])


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
        product = _patch_matrix(x, c.shape, y.shape, rows, cols, stride) @ _kernel_matrix(c).T
        yt = y.T   # [N, C_out, H_out, W_out], a view: adding to it writes y
        yt += alpha * product.reshape(yt.shape[0], yt.shape[2], yt.shape[3], -1).transpose(
            0, 3, 1, 2)


@fp16_uses_reference(0)
def conv2d_bwd_input_inplace(dy, c, dx, *, alpha=1.0, beta=0.0, padding, stride, dilation,
                             x_start, c_start, y_start):
    """dx = alpha * conv2d^T(dy, c) + beta * dx (nntile_kernels.generic_conv)."""
    found = _taps_after_beta(dx, beta, dx, c, dy,
                             (padding, stride, dilation, x_start, c_start, y_start))
    if found is not None:
        rows, cols = found
        patches = (alpha * _rows_matrix(dy)) @ _kernel_matrix(c)
        shape = (dy.shape[3], dy.shape[1], dy.shape[0], c.shape[2], c.shape[1], c.shape[0])
        _col2im(patches.reshape(shape), rows, cols, stride[0], stride[1], dx.T)


@fp16_uses_reference(0)
def conv2d_bwd_weight_inplace(x, dy, dc, *, alpha=1.0, beta=0.0, padding, stride, dilation,
                              x_start, c_start, y_start):
    """dc = alpha * (x correlated with dy) + beta * dc (nntile_kernels.generic_conv)."""
    found = _taps_after_beta(dc, beta, x, dc, dy,
                             (padding, stride, dilation, x_start, c_start, y_start))
    if found is not None:
        rows, cols = found
        product = _rows_matrix(dy).T @ _patch_matrix(x, dc.shape, dy.shape, rows, cols, stride)
        dct = dc.T   # [C_out, C_in, K_h, K_w], a view: adding to it writes dc
        dct += alpha * product.reshape(dct.shape)
