"""Helpers shared by the cpu kernel modules: fp16 routing, the views numba is handed, and
sums along a contiguous run that pipeline.

Arrays only: never imports nntile_spmd, mpi4py or cupy.
"""

import functools

import numpy as np
from numba import njit

from . import reference

# numba has no float16, so fp16 tiles take the NumPy reference kernels. Builtin dtypes
# are singletons, so `is` is the cheapest fp16 test (tiny tiles are common).
F16 = np.dtype(np.float16)


def folded_t(tile, shape):
    """The F-order fold of `tile` to `shape`, transposed: a C-ordered view, no copy.

    numba types an array that is both C- and F-contiguous (one with unit dims) as C,
    so F views would compile a second specialization per dtype for such tiles. The
    transposed view is C-ordered for every tile: one specialization per dtype, and
    kernels index it backwards (xt[b, p, j, i] is x[i, j, p, b]).
    """
    return tile.reshape(shape, order="F").T


def fp16_uses_reference(position):
    """Decorator: a call whose array at `position` is fp16 runs the same-named reference kernel.

    Costs one extra Python call, so latency-critical elementwise wrappers test F16 inline.
    """

    def decorate(kernel):
        slow = reference.KERNELS[kernel.__name__]

        @functools.wraps(kernel)  # keeps the signature visible to inspect.signature
        def dispatch(*arrays, **params):
            return (slow if arrays[position].dtype is F16 else kernel)(*arrays, **params)

        return dispatch

    return decorate


# Sums along one contiguous run (a reduced axis that is innermost in storage) with 8
# independent running sums: one running sum is a chain of dependent adds that neither
# pipelines nor vectorizes (numba keeps IEEE order), 8 chains do both. The grouping is
# fixed by position, so a tile's result does not depend on anything but its contents.
# The reduction rules (formulas/'s REDUCTIONS) generate such sums of their terms
# (generate_cpu_reduce.py); row_max serves the softmax family's generated loops.


@njit(cache=True, nogil=True)
def row_max(values):
    """max of a 1-d array (-inf when empty, nan if any is nan), in 8 chains merged
    pairwise, then the tail in order."""
    m0 = m1 = m2 = m3 = m4 = m5 = m6 = m7 = values.dtype.type(-np.inf)
    n, j = values.size, 0
    while j + 8 <= n:
        m0 = max(m0, values[j])
        m1 = max(m1, values[j + 1])
        m2 = max(m2, values[j + 2])
        m3 = max(m3, values[j + 3])
        m4 = max(m4, values[j + 4])
        m5 = max(m5, values[j + 5])
        m6 = max(m6, values[j + 6])
        m7 = max(m7, values[j + 7])
        j += 8
    top = max(max(max(m0, m1), max(m2, m3)), max(max(m4, m5), max(m6, m7)))
    for rest in range(j, n):
        top = max(top, values[rest])
    return top
