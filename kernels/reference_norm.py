"""NumPy reference kernels of the fiber products and pow (LayerNorm's primitives).

Part of the reference table (reference.py imports these). Arrays only: imports NumPy,
never nntile_spmd, mpi4py, numba or cupy. Same calling convention as reference.py.
A fiber of x along `axis` is indexed by that axis and x's trailing `batch_ndim` dims.
"""

import numpy as np


def _store(out, value, beta, previous):
    """out = value + beta*previous, never reading `previous` when beta == 0 (may be garbage)."""
    if beta == 0.0:
        out[...] = value
    else:
        out[...] = value + beta * previous


def _spread(f, ndim, axis, batch_ndim):
    """The fiber f as an array that broadcasts against a full tensor of `ndim` dims."""
    return np.expand_dims(f, tuple(i for i in range(ndim - batch_ndim) if i != axis))


def multiply_fiber(f, x, z, *, axis, batch_ndim=0, alpha=1.0):
    """z = alpha * f (broadcast along all dims but `axis` and the batch dims) * x."""
    z[...] = alpha * _spread(f, x.ndim, axis, batch_ndim) * x


def sumprod_fiber(x, y, f, *, axis, batch_ndim=0, alpha=1.0, beta=0.0):
    """f = alpha * sum of x*y over all dims but `axis` and the batch dims + beta*f."""
    wide = np.float32 if x.dtype == np.float16 else x.dtype   # fp16 products in fp32
    other = tuple(i for i in range(x.ndim - batch_ndim) if i != axis)
    total = np.multiply(x, y, dtype=wide).sum(axis=other, dtype=np.float64)
    _store(f, alpha * total, beta, f)


def sumprod_fiber_backward(f, x, dx, *, axis, batch_ndim=0, alpha=1.0):
    """dx += alpha * f (broadcast) * x."""
    dx += alpha * _spread(f, x.ndim, axis, batch_ndim) * x


def pow(x, y, *, alpha=1.0, exp=1.0):  # noqa: A001 - the kernel's name in every table
    """y = alpha * x**exp."""
    y[...] = alpha * np.power(x, exp)


def pow_backward(x, dy, dx, *, alpha=1.0, exp=1.0):
    """dx += alpha * exp * x**(exp - 1) * dy."""
    dx += (alpha * exp) * np.power(x, exp - 1.0) * dy
