"""BLAS matrix products of the cpu table: gemm on F-order tiles through scipy.linalg.blas.

Arrays only: never imports nntile_spmd, mpi4py or cupy. The multi-dim operands fold
to F-order (rows, cols, batch) views with no copy; each batch element is one BLAS
call that writes C in place. fp16 falls back to the NumPy reference. A compute_type
(the fp32_fast_* modes) rounds the fp32 inputs first and lets sgemm accumulate in fp32.
"""

import numpy as np
from scipy.linalg import blas

from .cpu_common import fp16_uses_reference
from .layout import gemm_folds
from .rounding import round_operand

_GEMM = {np.dtype(np.float32): blas.sgemm, np.dtype(np.float64): blas.dgemm}


@fp16_uses_reference(position=2)
def gemm(a, b, c, *, alpha=1.0, beta=0.0, trans_a=False, trans_b=False, ndim=1, batch_ndim=0,
         compute_type=None):
    """c = alpha*op(a)·op(b) + beta*c with NNTile's multi-dim and batch rules."""
    if compute_type is not None:
        a, b = round_operand(np, a, compute_type), round_operand(np, b, compute_type)
    routine = _GEMM[c.dtype]
    # A non-F-contiguous C would fold into a copy and silently drop the result.
    if not c.flags.f_contiguous:
        raise ValueError(f"gemm: output tile must be F-contiguous, got strides {c.strides}")
    a3, b3, c3 = gemm_folds(a.shape, b.shape, trans_a, trans_b, ndim, batch_ndim)
    a_view, b_view = a.reshape(a3, order="F"), b.reshape(b3, order="F")
    c_view = c.reshape(c3, order="F")
    for index in range(c3[2]):
        c_mat = c_view[:, :, index]
        # BLAS does not read C when beta == 0, so garbage (NaN) in C is harmless.
        a_mat, b_mat = a_view[:, :, index], b_view[:, :, index]
        result = routine(alpha, a_mat, b_mat, beta, c_mat, trans_a, trans_b, overwrite_c=True)
        # f2py hands back a copy when it could not write C in place (e.g. misaligned).
        if result is not c_mat:
            c_mat[...] = result
