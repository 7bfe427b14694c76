"""BLAS matrix products of the cpu table: gemm on F-order tiles through SciPy's BLAS.

Arrays only: never imports nntile_spmd, mpi4py or cupy. The multi-dim operands fold
to F-order (rows, cols, batch) views with no copy; each batch element is one BLAS
call that writes C in place. fp16 falls back to the NumPy reference. A compute_type
(the fp32_fast_* modes) rounds the fp32 inputs first and lets sgemm accumulate in fp32.

The batch loop runs in numba, calling the same sgemm/dgemm that scipy.linalg.blas
wraps (scipy.linalg.cython_blas exports their addresses): attention's tiles are
dozens of 64 x 64 products per task, where f2py's argument parsing on every call
was a large share of the time. Same routine, same arguments: bitwise the same results.
The routine's address is an argument, not a constant of the machine code, so the
loop is cached on disk like every other kernel (addresses differ between processes).
"""

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import get_cython_function_address, intrinsic
from scipy.linalg import blas

from . import reference
from .cpu_common import F16
from .layout import gemm_folds
from .rounding import round_operand

_GEMM = {np.dtype(np.float32): blas.sgemm, np.dtype(np.float64): blas.dgemm}


def start_blas_threads() -> None:
    """One product big enough for OpenBLAS to run it on its default threads, before the
    runtime limits them: where a process's products start under a limit of 1 thread,
    256^3 products run at about a quarter of their speed until a large one has run, so
    a tiled product of 256^2 tiles never recovered (docs/benchmarks.md#tiled-gemm;
    tests/kernels/test_kernels_blas.py)."""
    for routine, dtype in ((blas.sgemm, np.float32), (blas.dgemm, np.float64)):
        square = np.ones((256, 256), dtype, order="F")
        routine(1.0, square, square)


start_blas_threads()
_ADDRESS = {np.dtype(np.float32): get_cython_function_address("scipy.linalg.cython_blas", "sgemm"),
            np.dtype(np.float64): get_cython_function_address("scipy.linalg.cython_blas", "dgemm")}


@intrinsic
def _call_gemm(typingctx, address, transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c,
               ldc):
    """Call the Fortran ?gemm at `address`; every argument is an address (intp)."""
    signature = types.void(*([types.intp] * 14))

    def codegen(context, builder, sig, args):
        pointer = ir.IntType(8).as_pointer()
        function = ir.FunctionType(ir.VoidType(), [pointer] * 13)
        callee = builder.inttoptr(args[0], function.as_pointer())
        builder.call(callee, [builder.inttoptr(value, pointer) for value in args[1:]])
        return context.get_dummy_value()
    return signature, codegen


@njit(cache=True, nogil=True)
def _batched_gemm(address, trans_a, trans_b, dims, alpha, a, b, beta, c):
    """One ?gemm call per batch element of flat F-order operands (batch is last)."""
    m, n, k, lda, ldb, batch = dims
    ints = np.empty(6, np.int32)
    ints[0], ints[1], ints[2] = m, n, k
    ints[3], ints[4], ints[5] = lda, ldb, max(1, m)
    flags = np.empty(2, np.uint8)
    flags[0] = 84 if trans_a else 78        # 'T' or 'N'
    flags[1] = 84 if trans_b else 78
    scalars = np.empty(2, c.dtype)
    scalars[0], scalars[1] = alpha, beta
    item = c.itemsize
    step_a, step_b, step_c = a.size // batch * item, b.size // batch * item, c.size // batch * item
    at_int, at_flag, at_scalar = ints.ctypes.data, flags.ctypes.data, scalars.ctypes.data
    at_a, at_b, at_c = a.ctypes.data, b.ctypes.data, c.ctypes.data
    for index in range(batch):
        _call_gemm(address, at_flag, at_flag + 1, at_int, at_int + 4, at_int + 8, at_scalar,
                   at_a + index * step_a, at_int + 12, at_b + index * step_b, at_int + 16,
                   at_scalar + item, at_c + index * step_c, at_int + 20)
    # used after the loop: numba frees an array after its last use, and BLAS reads
    # these through raw addresses
    return ints[0] + flags[0] + scalars.size


def gemm(a, b, c, *, alpha=1.0, beta=0.0, trans_a=False, trans_b=False, ndim=1, batch_ndim=0,
         compute_type=None):
    """c = alpha*op(a)·op(b) + beta*c with NNTile's multi-dim and batch rules."""
    # One product of F-ordered matrices (a linear layer's tile, a K step of a tiled
    # product) goes straight to the f2py wrapper of the same ?gemm: one call costs less
    # than the folds and the numba loop (docs/benchmarks.md, "Measurements behind code
    # constants").
    routine = _GEMM.get(c.dtype)
    if (routine is not None and ndim == 1 and batch_ndim == 0 and compute_type is None
            and a.ndim == 2 and b.ndim == 2 and a.dtype is c.dtype and b.dtype is c.dtype
            and a.size and b.size and c.flags.f_contiguous and a.flags.f_contiguous
            and b.flags.f_contiguous):
        result = routine(alpha, a, b, beta, c, trans_a, trans_b, overwrite_c=True)
        if result is not c:     # f2py could not write C in place
            c[...] = result
        return
    (reference.KERNELS["gemm"] if c.dtype is F16 else folded_gemm)(
        a, b, c, alpha=alpha, beta=beta, trans_a=trans_a, trans_b=trans_b, ndim=ndim,
        batch_ndim=batch_ndim, compute_type=compute_type)


def folded_gemm(a, b, c, *, alpha, beta, trans_a, trans_b, ndim, batch_ndim, compute_type):
    """gemm of multi-dim, batched or rounded (compute_type) operands."""
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
        _batched_gemm(_ADDRESS[c.dtype], trans_a, trans_b, dims, alpha, a.ravel("K"),
                      b.ravel("K"), beta, c.ravel("K"))
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
