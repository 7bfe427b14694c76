"""Numba kernels of the fiber products (LayerNorm's primitives) of the cpu table; pow,
LayerNorm's other primitive, is a rule of rules.py (cpu_rules_params.py).

Arrays only: never imports nntile_spmd, mpi4py or cupy. A full tile is folded to
(m, n, k, batch) around the fiber axis n (layout.fiber_folds) and a fiber to
(n, batch); numba gets the C-ordered transposed views (cpu_common.folded_t), indexed
backwards, so x is visited in storage order. Sums accumulate in float64; fp16 falls
back to the NumPy reference (nntile_kernels.reference).
The fiber products that broadcast a fiber (multiply_fiber, sumprod_fiber_backward) are
rules of rules_broadcast.py, their loops generated into cpu_rules_broadcast.py.

PERF: LayerNorm's gamma is the fiber along axis 0, where m is 1: the kernels then loop
over j innermost (a length-1 loop over i stops vectorization), and sums over i use
cpu_common.row_dot.
"""

import numpy as np
from numba import njit

from . import reference
from .cpu_common import F16, folded_t, row_dot
from .layout import fiber_folds


def fiber_views(full, fiber, axis, batch_ndim):
    """(m, n, k, batch) views of the full arrays and the (n, batch) view of the fiber."""
    shape4 = fiber_folds(full[0].shape, axis, batch_ndim)
    return [folded_t(a, shape4) for a in full], folded_t(fiber, (shape4[1], shape4[3]))


@njit(cache=True, nogil=True)
def _sumprod_fiber(xt, yt, ft, alpha, beta):
    batch, k, n, m = xt.shape
    total = np.empty(n)
    for b in range(batch):
        total[:] = 0.0
        for p in range(k):
            if m == 1:   # one running sum per j: independent, so the loop over j vectorizes
                for j in range(n):
                    total[j] += xt[b, p, j, 0] * yt[b, p, j, 0]
                continue
            for j in range(n):
                total[j] += row_dot(xt[b, p, j], yt[b, p, j])
        for j in range(n):
            value = alpha * total[j]
            ft[b, j] = value if beta == 0.0 else value + beta * ft[b, j]  # f may be garbage


def sumprod_fiber(x, y, f, *, axis, batch_ndim=0, alpha=1.0, beta=0.0):
    """f = alpha * sum of x*y over all dims but `axis` and the batch dims + beta*f."""
    if x.dtype is F16:
        return reference.sumprod_fiber(x, y, f, axis=axis, batch_ndim=batch_ndim,
                                            alpha=alpha, beta=beta)
    (xt, yt), ft = fiber_views((x, y), f, axis, batch_ndim)
    _sumprod_fiber(xt, yt, ft, float(alpha), float(beta))

