"""Numba elementwise kernels of the cpu table: the linear ops (the activations and their
backwards are generated from their formulas: cpu_rules.py).

Arrays only: never imports nntile_spmd, mpi4py or cupy. Tiles are F-contiguous, so
``ravel("K")`` is a free flat view (numba cannot reshape F-ordered arrays itself);
one compiled specialization per dtype. fp16 falls back to the NumPy reference.
"""

from numba import njit

from . import reference
from .cpu_common import F16


# error_model="numpy": no zero-division branch, so LLVM vectorises the loops.
# Scalars are cast to the tile dtype inside the loops (``dtype.type(alpha)``) so fp32
# tiles are computed in fp32 like NumPy does, which keeps the loops vectorizable.


@njit(cache=True, nogil=True, error_model="numpy")
def _add(x, y, z, alpha, beta):
    a, b = z.dtype.type(alpha), z.dtype.type(beta)
    if beta == 0.0:  # y may be uninitialized (or be z itself holding garbage)
        for i in range(z.size):
            z[i] = a * x[i]
    else:
        for i in range(z.size):
            z[i] = a * x[i] + b * y[i]


@njit(cache=True, nogil=True, error_model="numpy")
def _multiply(x, y, z, alpha):
    a = z.dtype.type(alpha)
    for i in range(z.size):
        z[i] = a * x[i] * y[i]


@njit(cache=True, nogil=True, error_model="numpy")
def _scale(x, y, alpha):
    a = y.dtype.type(alpha)
    for i in range(y.size):
        y[i] = a * x[i]


def add(x, y, z, *, alpha, beta):
    """z = alpha*x + beta*y (y is not read when beta == 0)."""
    if x.dtype is F16:
        return reference.add(x, y, z, alpha=alpha, beta=beta)
    _add(x.ravel("K"), y.ravel("K"), z.ravel("K"), float(alpha), float(beta))


def multiply(x, y, z, *, alpha=1.0):
    """z = alpha*x*y."""
    if x.dtype is F16:
        return reference.multiply(x, y, z, alpha=alpha)
    _multiply(x.ravel("K"), y.ravel("K"), z.ravel("K"), float(alpha))


def scale(x, y, *, alpha):
    """y = alpha*x."""
    if x.dtype is F16:
        return reference.scale(x, y, alpha=alpha)
    _scale(x.ravel("K"), y.ravel("K"), float(alpha))
