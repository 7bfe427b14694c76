"""Numba kernel of the cpu table for the norm's backward along one axis (reference body
in generic_math.py; max_slice, min_slice, extremum_count, norm_slice and norm_fiber are
rules of rules_reduce.py, loops generated into cpu_rules_reduce.py; extremum_backward a
rule of rules_broadcast.py; the elementwise ops are loops generated from rules.py).

Arrays only: never imports nntile_spmd, mpi4py or cupy. Reductions run over folded_t's
C-ordered (n, k, m) view of the F-order fold (m, k, n), k the reduced axis. fp16 tiles
take the NumPy reference (numba has no float16). Loops that divide compile with
error_model="numpy": x / 0 is inf or nan as in NumPy, not a ZeroDivisionError.
"""

import math

from numba import njit

from .cpu_common import fp16_uses_reference, folded_t
from . import reference

REFERENCE = reference.KERNELS

# ---------------------------------------------------------------- reductions


def _folds(x, axis, *slices):
    """x's (n, k, m) view and each slice's (n, m) view (folded_t order)."""
    m, n = math.prod(x.shape[:axis]), math.prod(x.shape[axis + 1:])
    return (folded_t(x, (m, x.shape[axis], n)),
            *(folded_t(s, (m, n)) for s in slices))


@njit(cache=True, nogil=True)
def _norm_slice_backward(xt, yt, dyt, dxt, alpha):
    n, k, m = xt.shape
    for p in range(n):
        for i in range(m):
            if yt[p, i] != 0:
                scale = alpha * alpha * dyt[p, i] / yt[p, i]
                for j in range(k):
                    dxt[p, j, i] += scale * xt[p, j, i]


@fp16_uses_reference(0)
def norm_slice_backward(x, y, dy, dx, *, axis, alpha=1.0):
    """dx += alpha^2 * x / y * dy along `axis`; 0 where y == 0."""
    xt, yt, dyt = _folds(x, axis, y, dy)
    _norm_slice_backward(xt, yt, dyt, _folds(dx, axis)[0], alpha)


# sub, div, tanh, sigmoid and their backwards are rules (rules.py, cpu_rules.py)
KERNELS = {kernel.__name__: kernel for kernel in (
    norm_slice_backward,)}

# randn is whole-array uint64 hashing that NumPy already vectorises
# (nntile_kernels/generic_random.py)
KERNELS["randn"] = REFERENCE["randn"]
KERNELS["dropout"] = REFERENCE["dropout"]
