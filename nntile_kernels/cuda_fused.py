"""One kernel launch for work that CuPy array expressions split into several.

On a GPU every operator of an array expression is a kernel launch and a temporary tile;
the host's cost of those launches, not the device's, bounds a training step made of
thousands of small tasks. Here: the output store that most generic kernels end with
(out = alpha*value + beta*previous), the Adam and AdamW updates, and zeroing a tile
(a memset). Each takes what it can (fp32 and fp64 CuPy arrays) and leaves the rest to
the generic kernels, whose numerics these follow (docs/precision.md), and sees
Fortran-ordered tiles as their C-ordered transposes (layout.c_order_views).

Arrays only: imports CuPy, never nntile_spmd or mpi4py.
"""

import cupy as cp
import numpy as np

from . import generic_loss
from .layout import c_order_views

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))

# `previous` is loaded but not used when beta == 0: it may hold garbage (NaN)
_STORE = cp.ElementwiseKernel(
    "V value, P previous, float64 alpha, float64 beta", "T out",
    "out = beta == 0.0 ? (T)(alpha * value) : (T)(alpha * value + beta * previous)",
    "nntile_store")


def store(out, value, beta, previous, alpha) -> bool:
    """out = alpha*value + beta*previous in one pass over out (value broadcasts);
    False where the operands are not all fp32/fp64 CuPy arrays."""
    if not (isinstance(value, cp.ndarray) and isinstance(previous, cp.ndarray)
            and out.dtype in _FLOATS and value.dtype in _FLOATS
            and previous.dtype in _FLOATS):
        return False
    value, previous, out = c_order_views((value, previous, out))
    _STORE(value, previous, float(alpha), float(beta), out)
    return True


# PyTorch's Adam: moments start at zero (not read at step 1), bias corrections in
# float64 from the step counter that lives on the device
_ADAM = cp.ElementwiseKernel(
    "T grad, int64 step, float64 lr, float64 beta1, float64 beta2, float64 eps, "
    "float64 l2, float64 decay",
    "T param, T m, T v",
    """
    T g = grad;
    if (l2 != 0.0) g = grad + (T)l2 * param;
    if (decay != 1.0) param = param * (T)decay;
    const T keep1 = (T)(1.0 - beta1), keep2 = (T)(1.0 - beta2);
    if (step == 1) {
        m = keep1 * g;
        v = keep2 * g * g;
    } else {
        m = (T)beta1 * m + keep1 * g;
        v = (T)beta2 * v + keep2 * g * g;
    }
    const double t = (double)step;
    const T m_scale = (T)(1.0 / (1.0 - pow(beta1, t)));
    const T v_scale = (T)(1.0 / (1.0 - pow(beta2, t)));
    param = param - (T)lr * (m * m_scale) / (sqrt(v * v_scale) + (T)eps);
    """,
    "nntile_adam")


def _adam_takes(step, grad, param, m, v) -> bool:
    return (param.dtype in _FLOATS and grad.dtype == param.dtype and m.dtype == param.dtype
            and v.dtype == param.dtype and step.dtype == np.int64 and step.ndim == 0)


def adam_step(step, grad, param, m, v, *, lr, beta1=0.9, beta2=0.999, eps=1e-8,
              weight_decay=0.0):
    """PyTorch Adam (L2 weight decay added to the gradient) in one launch."""
    if not _adam_takes(step, grad, param, m, v):
        generic_loss.adam_step(cp, step, grad, param, m, v, lr=lr, beta1=beta1,
                               beta2=beta2, eps=eps, weight_decay=weight_decay)
        return
    grad, param, m, v = c_order_views((grad, param, m, v))
    _ADAM(grad, step, lr, beta1, beta2, eps, weight_decay, 1.0, param, m, v)


def adamw_step(step, grad, param, m, v, *, lr, beta1=0.9, beta2=0.999, eps=1e-8,
               weight_decay=0.0):
    """PyTorch AdamW (param *= 1 - lr*weight_decay first) in one launch."""
    if not _adam_takes(step, grad, param, m, v):
        generic_loss.adamw_step(cp, step, grad, param, m, v, lr=lr, beta1=beta1,
                                beta2=beta2, eps=eps, weight_decay=weight_decay)
        return
    grad, param, m, v = c_order_views((grad, param, m, v))
    _ADAM(grad, step, lr, beta1, beta2, eps, 0.0, 1.0 - lr * weight_decay, param, m, v)


def clear(x):
    """x[...] = 0: a memset where the tile is one block (CuPy's fill takes that path for
    C-ordered arrays only; tiles are Fortran-ordered)."""
    if x.size == 0:
        return
    if x.flags.f_contiguous or x.flags.c_contiguous:
        x.data.memset_async(0, x.nbytes)
    else:
        x.fill(0)
