"""Convolution and copy_intersection kernels written once against an array module `xp`
(bound to NumPy for the reference table and to CuPy for the cuda one by generic.table).

Arrays only: never imports nntile_spmd, mpi4py, numba or cupy. Tiles are WHCN (column-
major): images [W, H, C, N], kernels [K_w, K_h, C_in, C_out]. A step sees one tile of
each operand and where it starts in its tensor (x_start, c_start, y_start: (w, h) offsets
of the image, kernel and output tiles); it adds the terms whose input row falls inside
its input tile, so the plan may cut every axis and sum the steps of an output tile.
"""

from .generic_common import store, wide


def tap_rows(y_start, y_len, x_start, x_len, tap, padding, stride, dilation):
    """Output rows [lo, hi) of the tile whose input row for kernel tap `tap` (a global
    index) lies in the input tile, and that input row of lo, local; None when none does.

    Output row i (global y_start + i) reads input row stride*(y_start+i) - padding +
    dilation*tap, local to the input tile: base + stride*i.
    """
    base = stride * y_start - padding + dilation * tap - x_start
    lo = max(0, -(base // stride))
    hi = min(y_len, (x_len - 1 - base) // stride + 1)
    if hi <= lo:
        return None
    return lo, hi, base + stride * lo


def taps(x_shape, c_shape, y_shape, padding, stride, dilation, x_start, c_start, y_start):
    """(p, q, output slices, input slices) of every kernel tap that meets the input tile."""
    for p in range(c_shape[0]):
        rows = tap_rows(y_start[0], y_shape[0], x_start[0], x_shape[0], c_start[0] + p,
                        padding[0], stride[0], dilation[0])
        if rows is None:
            continue
        for q in range(c_shape[1]):
            cols = tap_rows(y_start[1], y_shape[1], x_start[1], x_shape[1], c_start[1] + q,
                            padding[1], stride[1], dilation[1])
            if cols is None:
                continue
            out = (slice(rows[0], rows[1]), slice(cols[0], cols[1]))
            inp = tuple(slice(first, first + step * (hi - lo - 1) + 1, step)
                        for (lo, hi, first), step in ((rows, stride[0]), (cols, stride[1])))
            yield p, q, out, inp


def conv2d_inplace(xp, x, c, y, *, alpha=1.0, beta=0.0, padding, stride, dilation,
                   x_start, c_start, y_start):
    """y = alpha * sum over taps and input channels of x * c + beta * y."""
    total = xp.zeros(y.shape, dtype=wide(xp, y.dtype))
    for p, q, out, inp in taps(x.shape, c.shape, y.shape, padding, stride, dilation,
                               x_start, c_start, y_start):
        # [i, j, C_in, N] . [C_in, C_out] -> [i, j, N, C_out]
        total[out] += xp.tensordot(x[inp], c[p, q], axes=([2], [0])).transpose(0, 1, 3, 2)
    store(y, total, beta, y, alpha)


def conv2d_bwd_input_inplace(xp, dy, c, dx, *, alpha=1.0, beta=0.0, padding, stride,
                             dilation, x_start, c_start, y_start):
    """dx = alpha * (each dy row sent back through the taps that read dx) + beta * dx."""
    total = xp.zeros(dx.shape, dtype=wide(xp, dx.dtype))
    for p, q, out, inp in taps(dx.shape, c.shape, dy.shape, padding, stride, dilation,
                               x_start, c_start, y_start):
        # [i, j, C_out, N] . [C_in, C_out]^T -> [i, j, N, C_in]
        total[inp] += xp.tensordot(dy[out], c[p, q], axes=([2], [1])).transpose(0, 1, 3, 2)
    store(dx, total, beta, dx, alpha)


def conv2d_bwd_weight_inplace(xp, x, dy, dc, *, alpha=1.0, beta=0.0, padding, stride,
                              dilation, x_start, c_start, y_start):
    """dc = alpha * sum over positions and the batch of x * dy + beta * dc."""
    total = xp.zeros(dc.shape, dtype=wide(xp, dc.dtype))
    for p, q, out, inp in taps(x.shape, dc.shape, dy.shape, padding, stride, dilation,
                               x_start, c_start, y_start):
        # [i, j, C_in, N] . [i, j, C_out, N] -> [C_in, C_out]
        total[p, q] = xp.tensordot(x[inp], dy[out], axes=([0, 1, 3], [0, 1, 3]))
    store(dc, total, beta, dc, alpha)


def intersection(src_shape, src_start, dst_shape, dst_start):
    """(source slices, destination slices) of where two placed tiles overlap, or None."""
    src_slices, dst_slices = [], []
    for size, start, dst_size, dst_at in zip(src_shape, src_start, dst_shape, dst_start):
        lo, hi = max(start, dst_at), min(start + size, dst_at + dst_size)
        if hi <= lo:
            return None
        src_slices.append(slice(lo - start, hi - start))
        dst_slices.append(slice(lo - dst_at, hi - dst_at))
    return tuple(src_slices), tuple(dst_slices)


def copy_intersection(xp, src, dst, *, src_start, dst_start):
    """dst = src where the tiles, placed at src_start and dst_start, overlap."""
    overlap = intersection(src.shape, src_start, dst.shape, dst_start)
    if overlap is not None:
        dst[overlap[1]] = src[overlap[0]]
