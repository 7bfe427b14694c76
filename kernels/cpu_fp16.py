"""fp16 routing of the cpu table: numba has no float16, so fp16 tiles take the NumPy reference.

Arrays only: never imports nntile_spmd, mpi4py or cupy.
"""

import functools

import numpy as np

from . import reference

# Builtin dtypes are singletons, so `is` is the cheapest fp16 test (tiny tiles are common).
F16 = np.dtype(np.float16)


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
