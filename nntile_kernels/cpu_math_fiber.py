"""Numba kernel of the cpu table for norm_fiber (reference body in generic_math.py;
scale_fiber, norm_fiber_backward and sum_backward are rules of rules_broadcast.py).

Arrays only: never imports nntile_spmd, mpi4py or cupy. A tile is viewed through
folded_t as (b, k, n, m): n the fiber's axis, m the dims before it, k the dims after it
up to the batch dims b. fp16 tiles take the NumPy reference (numba has no float16).
"""

import math

from numba import njit

from .cpu_common import fp16_uses_reference, folded_t


def _fiber_folds(x, axis, batch_ndim, *fibers):
    """x's (b, k, n, m) view and each fiber's (b, n) view (folded_t order)."""
    first_batch = x.ndim - batch_ndim
    m, n = math.prod(x.shape[:axis]), x.shape[axis]
    k, b = math.prod(x.shape[axis + 1:first_batch]), math.prod(x.shape[first_batch:])
    return (folded_t(x, (m, n, k, b)), *(folded_t(f, (n, b)) for f in fibers))


@njit(cache=True, nogil=True)
def _norm_fiber(xt, yt, alpha, beta):
    bs, ks, ns, ms = xt.shape
    for b in range(bs):
        for n in range(ns):
            total = 0.0   # float64: fp32 squares summed in fp64 cannot overflow
            for k in range(ks):
                for m in range(ms):
                    total += float(xt[b, k, n, m]) ** 2
            norm = abs(alpha) * math.sqrt(total)
            yt[b, n] = norm if beta == 0.0 else math.hypot(norm, beta * yt[b, n])


@fp16_uses_reference(0)
def norm_fiber(x, y, *, axis, batch_ndim=0, alpha=1.0, beta=0.0):
    """y = hypot(alpha * 2-norm of x over all dims but `axis` and the batch dims, beta*y)."""
    _norm_fiber(*_fiber_folds(x, axis, batch_ndim, y), alpha, beta)


KERNELS = {"norm_fiber": norm_fiber}
