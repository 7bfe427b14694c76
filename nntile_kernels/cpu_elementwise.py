"""Numba elementwise kernels of the cpu table (linear ops, activations and their backward).

Arrays only: never imports nntile_spmd, mpi4py or cupy. Tiles are F-contiguous, so
``ravel("K")`` is a free flat view (numba cannot reshape F-ordered arrays itself);
one compiled specialization per dtype. fp16 falls back to the NumPy reference.
"""

import math

from numba import njit

from . import reference
from .cpu_common import F16
from .cpu_fastmath import fast_erf, fast_exp, fast_tanh

_RSQRT2 = 1.0 / math.sqrt(2.0)
_RSQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_GELU_TANH_CUBIC = 0.044715

# error_model="numpy" (no zero-division branch) and cpu_fastmath's functions let LLVM
# vectorise the loops; float32 gets the fast approximations, float64 libm.
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


# ---------------------------------------------------------------- activations


@njit(cache=True, nogil=True, error_model="numpy")
def _gelu(x, y):
    t = x.dtype.type
    half, one, rsqrt2 = t(0.5), t(1.0), t(_RSQRT2)
    for i in range(x.size):
        v = x[i]
        y[i] = half * v * (one + fast_erf(v * rsqrt2))


@njit(cache=True, nogil=True, error_model="numpy")
def _gelutanh(x, y):
    t = x.dtype.type
    half, one, k, c = t(0.5), t(1.0), t(_SQRT_2_OVER_PI), t(_GELU_TANH_CUBIC)
    for i in range(x.size):
        v = x[i]
        y[i] = half * v * (one + fast_tanh(k * (v + c * v * v * v)))


@njit(cache=True, nogil=True, error_model="numpy")
def _relu(x, y):
    zero = x.dtype.type(0.0)
    for i in range(x.size):
        y[i] = max(x[i], zero)  # numba's max(nan, 0) is nan, as np.maximum


@njit(cache=True, nogil=True, error_model="numpy")
def _silu(x, y):
    one = x.dtype.type(1.0)
    for i in range(x.size):
        v = x[i]
        # exp(-v) overflowing to inf gives 0, the right limit: no NaN for very negative v.
        y[i] = v / (one + fast_exp(-v))


@njit(cache=True, nogil=True, error_model="numpy")
def _sqrt(x, y):
    for i in range(x.size):
        y[i] = math.sqrt(x[i])


@njit(cache=True, nogil=True, error_model="numpy")
def _gelu_backward(x, dy, dx):
    t = x.dtype.type
    half, one, rsqrt2, rsqrt_2pi = t(0.5), t(1.0), t(_RSQRT2), t(_RSQRT_2PI)
    for i in range(x.size):
        v = x[i]
        cdf = half * (one + fast_erf(v * rsqrt2))
        pdf = fast_exp(-half * v * v) * rsqrt_2pi
        dx[i] += (cdf + v * pdf) * dy[i]


@njit(cache=True, nogil=True, error_model="numpy")
def _gelutanh_backward(x, dy, dx):
    t = x.dtype.type
    half, one, k, c = t(0.5), t(1.0), t(_SQRT_2_OVER_PI), t(_GELU_TANH_CUBIC)
    three_c = t(3.0 * _GELU_TANH_CUBIC)
    for i in range(x.size):
        v = x[i]
        th = fast_tanh(k * (v + c * v * v * v))
        inner = k * (one + three_c * v * v)
        dx[i] += (half * (one + th) + half * v * (one - th * th) * inner) * dy[i]


@njit(cache=True, nogil=True, error_model="numpy")
def _relu_backward(x, dy, dx):
    zero = x.dtype.type(0.0)
    for i in range(x.size):
        if x[i] > zero:  # relu'(0) = 0
            dx[i] += dy[i]


@njit(cache=True, nogil=True, error_model="numpy")
def _silu_backward(x, dy, dx):
    one = x.dtype.type(1.0)
    for i in range(x.size):
        v = x[i]
        s = one / (one + fast_exp(-v))
        dx[i] += s * (one + v * (one - s)) * dy[i]


@njit(cache=True, nogil=True, error_model="numpy")
def _sqrt_backward(x, dy, dx):
    half = x.dtype.type(0.5)
    for i in range(x.size):
        dx[i] += half * dy[i] / math.sqrt(x[i])


def gelu(x, y):
    """y = 0.5*x*(1 + erf(x/sqrt(2)))."""
    if x.dtype is F16:
        return reference.gelu(x, y)
    _gelu(x.ravel("K"), y.ravel("K"))


def gelutanh(x, y):
    """y = 0.5*x*(1 + tanh(sqrt(2/pi)*(x + 0.044715*x^3)))."""
    if x.dtype is F16:
        return reference.gelutanh(x, y)
    _gelutanh(x.ravel("K"), y.ravel("K"))


def relu(x, y):
    """y = max(x, 0)."""
    if x.dtype is F16:
        return reference.relu(x, y)
    _relu(x.ravel("K"), y.ravel("K"))


def silu(x, y):
    """y = x*sigmoid(x)."""
    if x.dtype is F16:
        return reference.silu(x, y)
    _silu(x.ravel("K"), y.ravel("K"))


def sqrt(x, y):
    """y = sqrt(x)."""
    if x.dtype is F16:
        return reference.sqrt(x, y)
    _sqrt(x.ravel("K"), y.ravel("K"))


def gelu_backward(x, dy, dx):
    """dx += gelu'(x)*dy."""
    if x.dtype is F16:
        return reference.gelu_backward(x, dy, dx)
    _gelu_backward(x.ravel("K"), dy.ravel("K"), dx.ravel("K"))


def gelutanh_backward(x, dy, dx):
    """dx += gelutanh'(x)*dy."""
    if x.dtype is F16:
        return reference.gelutanh_backward(x, dy, dx)
    _gelutanh_backward(x.ravel("K"), dy.ravel("K"), dx.ravel("K"))


def relu_backward(x, dy, dx):
    """dx += (x > 0)*dy."""
    if x.dtype is F16:
        return reference.relu_backward(x, dy, dx)
    _relu_backward(x.ravel("K"), dy.ravel("K"), dx.ravel("K"))


def silu_backward(x, dy, dx):
    """dx += sigmoid(x)*(1 + x*(1 - sigmoid(x)))*dy."""
    if x.dtype is F16:
        return reference.silu_backward(x, dy, dx)
    _silu_backward(x.ravel("K"), dy.ravel("K"), dx.ravel("K"))


def sqrt_backward(x, dy, dx):
    """dx += dy/(2*sqrt(x))."""
    if x.dtype is F16:
        return reference.sqrt_backward(x, dy, dx)
    _sqrt_backward(x.ravel("K"), dy.ravel("K"), dx.ravel("K"))
