"""Numba reshape_box of the cpu table (add_box is a NumPy slice assignment there: a
memcpy per column, which a loop would not beat).

Arrays only: never imports nntile_spmd, mpi4py or cupy.
"""

import numpy as np
from numba import njit

from .cpu_common import fp16_uses_reference


@njit(cache=True, nogil=True)
def _reshape_box(x, y, x_offset, x_tile, x_whole, y_offset, y_tile, y_whole):
    """y[e] += x at the same whole-tensor flat index, for each y element e inside x's tile.

    Walks y's tile one column (run along dim 0) at a time: the run's first element is
    unravelled into x's coordinates once, then they advance by one with carries, so
    each element costs a compare or two instead of a division per dim."""
    run, x_ndim = y_tile[0], x_whole.shape[0]
    coord = np.zeros(x_ndim, dtype=np.int64)
    for column in range(y.size // run):
        flat, stride, rest = y_offset[0], y_whole[0], column
        for d in range(1, y_tile.shape[0]):
            flat += (rest % y_tile[d] + y_offset[d]) * stride
            rest //= y_tile[d]
            stride *= y_whole[d]
        for d in range(x_ndim):
            coord[d] = flat % x_whole[d]
            flat //= x_whole[d]
        for i in range(run):
            inside, local, local_stride = True, 0, 1
            for d in range(x_ndim):
                c = coord[d] - x_offset[d]
                if c < 0 or c >= x_tile[d]:
                    inside = False
                    break
                local += c * local_stride
                local_stride *= x_tile[d]
            if inside:
                y[column * run + i] += x[local]
            d = 0
            coord[0] += 1
            while d + 1 < x_ndim and coord[d] == x_whole[d]:   # carry into the next dim
                coord[d] = 0
                coord[d + 1] += 1
                d += 1


def _ints(values):
    return np.array(values, dtype=np.int64).reshape(-1)


@fp16_uses_reference(1)
def reshape_box(x, y, *, x_offset, y_offset, x_shape, y_shape, beta=0.0):
    """y = beta*y + the elements of x's tile that y's tile holds (reference.reshape_box)."""
    if beta == 0:
        y.fill(0)
    elif beta != 1:
        y *= beta
    if y.ndim == 0 or x.ndim == 0:   # a 0-d tile holds one element: no run to walk
        y.reshape(-1)[:] += x.reshape(-1)[:y.size]
        return
    _reshape_box(x.ravel("K"), y.ravel("K"), _ints(x_offset), _ints(x.shape), _ints(x_shape),
                 _ints(y_offset), _ints(y.shape), _ints(y_shape))
