"""Kernels on 16-bit tiles (bf16, fp16): convert to fp32 on load, compute with the
fp32 kernel, round to the tile's dtype on store; on the CPU and the GPU alike.

Numba has neither bfloat16 nor float16, BLAS has no 16-bit gemm, and CuPy's own
16-bit math would compute in 16 bits (or, through the array expressions of a rule,
failed outright with a KeyError), so every kernel runs on 16-bit tiles this way: the
arithmetic, a gemm's accumulation and a reduction's sums are fp32 (or wider, as the
fp32 kernel carries them), and only the stored results are rounded (nearest, ties to
even). Arrays only: imports NumPy and ml_dtypes, never nntile_spmd, mpi4py, numba or
cupy (the caller passes its array module `xp` for the fp32 buffers).
"""

import functools

import ml_dtypes
import numpy as np

HALF = (np.dtype(ml_dtypes.bfloat16), np.dtype(np.float16))
F32 = np.dtype(np.float32)
# Kernels that only move or convert values: NumPy does them on 16-bit arrays directly.
DATA_MOVEMENT = frozenset({"cast", "copy", "clear", "fill"})
# Kernels that call another kernel of their own table (reshaped_call runs one on tiles
# the plan aliases as views): bound to the widened table, which does the widening.
TABLE_BOUND = frozenset({"reshaped_call"})


def widened(kernel, num_outputs=None, xp=np):
    """`kernel` on fp32 copies of its 16-bit arrays (`xp` arrays); the last
    `num_outputs` arrays are its outputs, rounded back (None: every converted array
    is written back)."""

    def call(*arrays, **params):
        first_output = len(arrays) - (len(arrays) if num_outputs is None else num_outputs)
        # beta == 0: the kernel never reads its outputs' old values (the calling
        # convention), so an output that is no input needs no conversion on load
        unread = num_outputs is not None and params.get("beta", 1.0) == 0.0
        copies = {}                  # id of a 16-bit array -> its fp32 copy (aliases share)
        for position, array in enumerate(arrays):
            if array.dtype in HALF and id(array) not in copies:
                copies[id(array)] = (xp.empty(array.shape, F32, order="F")
                                     if unread and position >= first_output
                                     else array.astype(F32, order="F"))
        if not copies:
            return kernel(*arrays, **params)
        kernel(*[copies.get(id(array), array) for array in arrays], **params)
        outputs = arrays[first_output:]
        stored = set()
        for array in outputs:
            copy = copies.get(id(array))
            if copy is not None and id(array) not in stored:
                stored.add(id(array))
                array[...] = copy    # rounds to the tile's dtype
        return None

    call.__name__ = call.__qualname__ = getattr(kernel, "__name__", "kernel")
    call.__wrapped__ = kernel
    return call


def widen_table(kernels, num_outputs=None, xp=np):
    """A copy of a kernel table (on `xp` arrays) whose kernels accept 16-bit tiles.

    num_outputs: {kernel name: how many trailing arrays are outputs}; a kernel not in
    it writes back every array it converted (correct, but it rewrites its inputs).
    """
    num_outputs = num_outputs or {}
    table = {name: kernel if name in DATA_MOVEMENT else widened(kernel, num_outputs.get(name), xp)
             for name, kernel in kernels.items() if name not in TABLE_BOUND}
    for name in TABLE_BOUND & kernels.keys():
        table[name] = functools.partial(kernels[name].func, table)
    return table
