"""Helpers shared by the cpu kernel modules: fp16 routing and the views numba is handed.

Arrays only: never imports nntile_spmd, mpi4py or cupy.
"""

import functools

import numpy as np

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
