"""Shape arithmetic shared by the kernel backends (pure Python, imports nothing heavy).

Tiles are Fortran-ordered, so folding consecutive dims into one is a free view.
"""

import itertools
import math


def fold(shape, cuts):
    """Products of the groups of consecutive dims of `shape` split at positions `cuts`."""
    bounds = (0, *cuts, len(shape))
    return tuple(math.prod(shape[lo:hi]) for lo, hi in itertools.pairwise(bounds))


def gemm_folds(a_shape, b_shape, trans_a, trans_b, ndim, batch_ndim):
    """F-order 3-D shapes (rows, cols, batch) of gemm's a, b and c under NNTile's rules.

    A is [M..., K..., batch...] ([K..., M..., batch...] when trans_a), B is
    [K..., N..., batch...] ([N..., K..., batch...] when trans_b), C is
    [M..., N..., batch...]; `ndim` counts the K dims.
    """
    m_dims = len(a_shape) - ndim - batch_ndim
    n_dims = len(b_shape) - ndim - batch_ndim
    a3 = fold(a_shape, (ndim if trans_a else m_dims, ndim + m_dims))
    b3 = fold(b_shape, (n_dims if trans_b else ndim, ndim + n_dims))
    m = a3[1] if trans_a else a3[0]
    n = b3[0] if trans_b else b3[1]
    return a3, b3, (m, n, a3[2])


def fiber_folds(shape, axis, batch_ndim):
    """(m, n, k, batch) of a tensor seen as [before axis, axis, after axis, batch dims]."""
    return fold(shape, (axis, axis + 1, len(shape) - batch_ndim))



def c_order_views(arrays):
    """The arrays transposed (a Fortran-ordered tile's transpose is a C-ordered view of
    the same memory) when the last one, the output, is Fortran-ordered and every array
    has its ndim or none; else the arrays as they are.

    CuPy's elementwise kernels walk the index space in C order, so on Fortran-ordered
    tiles neighbouring threads touch distant memory. Transposing every operand keeps
    the elementwise result (broadcasting aligns trailing dims, hence the same ndim)."""
    out = arrays[-1]
    if out.ndim < 2 or out.flags.c_contiguous or not out.flags.f_contiguous:
        return arrays
    if any(array.ndim not in (0, out.ndim) for array in arrays):
        return arrays
    return tuple(array.T for array in arrays)


def slice_folds(shape, axis):
    """(m, n, k) of a tile around `axis` (n its length) and (m, k) of its slices there."""
    m, n, k = fold(shape, (axis, axis + 1))
    return (m, n, k), (m, k)


def fiber_partner_folds(shape, axis, batch_ndim):
    """(m, n, k, batch) of a tile around `axis` (fiber_folds) and (n, batch) of its fibers."""
    m, n, k, batch = fiber_folds(shape, axis, batch_ndim)
    return (m, n, k, batch), (n, batch)
