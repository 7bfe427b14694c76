"""BLAS matrix products of the cpu table: gemm on F-order tiles through SciPy's BLAS.

Arrays only: never imports nntile_spmd, mpi4py or cupy. The multi-dim operands fold
to F-order (rows, cols, batch) views with no copy; each batch element is one BLAS
call that writes C in place. fp16 falls back to the NumPy reference. A compute_type
(the fp32_fast_* modes) rounds the fp32 inputs first and lets sgemm accumulate in fp32.

The batch loop runs in numba, calling the same sgemm/dgemm that scipy.linalg.blas
wraps (scipy.linalg.cython_blas exports their addresses): attention's tiles are
dozens of 64 x 64 products per task, where f2py's argument parsing (~1 us a call)
was a seventh of the time. Same routine, same arguments: bitwise the same results.
"""

import ctypes

import numpy as np
from numba import njit
from numba.extending import get_cython_function_address
from scipy.linalg import blas

from .cpu_common import fp16_uses_reference
from .layout import gemm_folds
from .rounding import round_operand

_GEMM = {np.dtype(np.float32): blas.sgemm, np.dtype(np.float64): blas.dgemm}

# Fortran BLAS ?gemm: every argument by pointer (transa, transb, m, n, k, alpha, a,
# lda, b, ldb, beta, c, ldc).
_GEMM_TYPE = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * 13))
_SGEMM = _GEMM_TYPE(get_cython_function_address("scipy.linalg.cython_blas", "sgemm"))
_DGEMM = _GEMM_TYPE(get_cython_function_address("scipy.linalg.cython_blas", "dgemm"))


def _batched(routine):
    """A numba loop calling `routine` once per batch element of flat F-order operands.

    Not cache=True: the routine's address is baked into the machine code and differs
    between processes; compiled once per process and dtype on the first call.
    """

    @njit(nogil=True)
    def run(trans_a, trans_b, dims, alpha, a, b, beta, c):
        m, n, k, lda, ldb, batch = dims
        ints = np.empty(6, np.int32)
        ints[0], ints[1], ints[2] = m, n, k
        ints[3], ints[4], ints[5] = lda, ldb, max(1, m)
        flags = np.empty(2, np.uint8)
        flags[0] = 84 if trans_a else 78        # 'T' or 'N'
        flags[1] = 84 if trans_b else 78
        scalars = np.empty(2, c.dtype)
        scalars[0], scalars[1] = alpha, beta
        size_a, size_b, size_c = a.size // batch, b.size // batch, c.size // batch
        for index in range(batch):
            routine(flags[0:].ctypes, flags[1:].ctypes, ints[0:].ctypes, ints[1:].ctypes,
                    ints[2:].ctypes, scalars[0:].ctypes, a[index * size_a:].ctypes,
                    ints[3:].ctypes, b[index * size_b:].ctypes, ints[4:].ctypes,
                    scalars[1:].ctypes, c[index * size_c:].ctypes, ints[5:].ctypes)
    return run


_BATCHED = {np.dtype(np.float32): _batched(_SGEMM), np.dtype(np.float64): _batched(_DGEMM)}


@fp16_uses_reference(position=2)
def gemm(a, b, c, *, alpha=1.0, beta=0.0, trans_a=False, trans_b=False, ndim=1, batch_ndim=0,
         compute_type=None):
    """c = alpha*op(a)·op(b) + beta*c with NNTile's multi-dim and batch rules."""
    if compute_type is not None:
        a, b = round_operand(np, a, compute_type), round_operand(np, b, compute_type)
    # A non-F-contiguous C would fold into a copy and silently drop the result.
    if not c.flags.f_contiguous:
        raise ValueError(f"gemm: output tile must be F-contiguous, got strides {c.strides}")
    a3, b3, c3 = gemm_folds(a.shape, b.shape, trans_a, trans_b, ndim, batch_ndim)
    if c.size and a.dtype == b.dtype == c.dtype and a.flags.f_contiguous and b.flags.f_contiguous:
        # BLAS does not read C when beta == 0, so garbage (NaN) in C is harmless.
        k = a3[0] if trans_a else a3[1]
        dims = (c3[0], c3[1], k, max(1, a3[0]), max(1, b3[0]), c3[2])
        _BATCHED[c.dtype](trans_a, trans_b, dims, alpha, a.ravel("K"), b.ravel("K"), beta,
                          c.ravel("K"))
        return
    routine = _GEMM[c.dtype]
    a_view, b_view = a.reshape(a3, order="F"), b.reshape(b3, order="F")
    c_view = c.reshape(c3, order="F")
    for index in range(c3[2]):
        c_mat = c_view[:, :, index]
        a_mat, b_mat = a_view[:, :, index], b_view[:, :, index]
        result = routine(alpha, a_mat, b_mat, beta, c_mat, trans_a, trans_b, overwrite_c=True)
        # f2py hands back a copy when it could not write C in place (e.g. misaligned).
        if result is not c_mat:
            c_mat[...] = result
