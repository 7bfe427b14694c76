"""Numba transposes of the cpu table (sum and sum_fiber are reduction rules of
formulas/reductions.py, their loops generated into cpu_rules_reduce.py; add_fiber, the
fiber broadcast, a broadcast rule, its loop in cpu_rules_broadcast.py; the softmax
family rules too, their loops in cpu_rules_softmax.py).

Arrays only: never imports nntile_spmd, mpi4py or cupy. Each wrapper folds its tile
to a fixed rank and hands numba the C-ordered transpose (cpu_common.folded_t), so one
compiled specialization per dtype serves every tile shape; kernels index backwards.
fp16 falls back to the NumPy reference.
"""

from numba import njit

from . import reference
from .cpu_common import F16, folded_t
from .layout import fold


@njit(cache=True, nogil=True)
def _transpose(xt, yt, alpha):
    n, m = xt.shape  # x is (m, n), y is (n, m)
    a = yt.dtype.type(alpha)
    block = 32  # cache blocking: one side is always read or written with a stride
    if m < block:
        # few rows (attention's heads moved last): x is read in storage order and y
        # written as m sequential streams; the blocked loops below would run an
        # m-long inner loop per block, which is slower for few rows
        for j in range(n):
            for i in range(m):
                yt[i, j] = a * xt[j, i]
        return
    for j0 in range(0, n, block):
        for i0 in range(0, m, block):
            for j in range(j0, min(j0 + block, n)):
                for i in range(i0, min(i0 + block, m)):
                    yt[i, j] = a * xt[j, i]


def transpose(x, y, *, alpha=1.0, ndim):
    """y = alpha * x with its first `ndim` dims moved to the end."""
    if x.dtype is F16:
        return reference.transpose(x, y, alpha=alpha, ndim=ndim)
    m, n = fold(x.shape, (ndim,))
    _transpose(folded_t(x, (m, n)), folded_t(y, (n, m)), float(alpha))
