"""gemm on CuPy tiles through cuBLAS: one strided-batched call per task, in place.

Tiles are Fortran-ordered, cuBLAS's own layout, so NNTile's multi-dim and batch rules
fold every operand into (rows, cols, batch) views without a copy (layout.gemm_folds),
alpha, beta and the transposes go to the call, and C accumulates where it lies: no
transposed copies of the operands, no temporary product. Operands it cannot take as
they are (16-bit or mixed dtypes, a compute_type that rounds inputs, strided views)
go to the generic CuPy kernel.

Arrays only: imports CuPy, never nntile_spmd or mpi4py.
"""

import numpy as np
from cupy.cuda import device
from cupy_backends.cuda.libs import cublas

from .layout import gemm_folds

_STRIDED_BATCHED = {np.dtype(np.float32): cublas.sgemmStridedBatched,
                    np.dtype(np.float64): cublas.dgemmStridedBatched}
_OPERATION = {False: cublas.CUBLAS_OP_N, True: cublas.CUBLAS_OP_T}
_HOST_NUMBERS = (int, float, np.integer, np.floating)


def takes_as_is(a, b, c, alpha, beta, compute_type) -> bool:
    """True where one cuBLAS call computes the product on the tiles themselves (alpha and
    beta host numbers: a scalar that lives in a device tile goes the generic way)."""
    return (compute_type is None and c.dtype in _STRIDED_BATCHED
            and isinstance(alpha, _HOST_NUMBERS) and isinstance(beta, _HOST_NUMBERS)
            and a.dtype == c.dtype and b.dtype == c.dtype
            and a.size > 0 and b.size > 0 and c.size > 0
            and a.flags.f_contiguous and b.flags.f_contiguous and c.flags.f_contiguous)


def gemm(a, b, c, *, alpha, beta, trans_a, trans_b, ndim, batch_ndim):
    """c = alpha*op(a)·op(b) + beta*c for tiles that `takes_as_is`."""
    a3, b3, (m, n, batch) = gemm_folds(a.shape, b.shape, trans_a, trans_b, ndim, batch_ndim)
    k = a3[0] if trans_a else a3[1]
    # cuBLAS reads alpha and beta from host memory before the call returns
    scalars = np.array([alpha, beta], dtype=c.dtype)
    handle = device.get_cublas_handle()
    cublas.setPointerMode(handle, cublas.CUBLAS_POINTER_MODE_HOST)
    _STRIDED_BATCHED[c.dtype](
        handle, _OPERATION[trans_a], _OPERATION[trans_b], m, n, k,
        scalars.ctypes.data, a.data.ptr, max(1, a3[0]), a3[0] * a3[1],
        b.data.ptr, max(1, b3[0]), b3[0] * b3[1],
        scalars.ctypes.data + scalars.itemsize, c.data.ptr, max(1, m), m * n, batch)
