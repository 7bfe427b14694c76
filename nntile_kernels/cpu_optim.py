"""Numba optimizer steps (SGD, Adam, AdamW with PyTorch semantics) of the cpu table.

Arrays only: never imports nntile_spmd, mpi4py or cupy. One fused pass over the
flat tiles per step; hyperparameters are cast to the tile dtype like NumPy does.
fp16 falls back to the NumPy reference.
"""

import math

from numba import njit

from .cpu_common import fp16_uses_reference


@njit(cache=True, nogil=True)
def _sgd(grad, param, velocity, first, lr, momentum, weight_decay, dampening, nesterov):
    t = param.dtype.type
    lr_, mu, wd, keep = t(lr), t(momentum), t(weight_decay), t(1.0 - dampening)
    for i in range(param.size):
        g = grad[i] + wd * param[i]
        if momentum != 0.0:
            # At the first step velocity is not read: it may be uninitialized.
            vel = g if first else mu * velocity[i] + keep * g
            velocity[i] = vel
            g = g + mu * vel if nesterov else vel
        param[i] -= lr_ * g


@njit(cache=True, nogil=True, error_model="numpy")   # no zero-division branch: the loop vectorises
def _adam(grad, param, m, v, first, hyper):
    step_size, beta1, beta2, eps, bias2_sqrt, l2, decay = hyper
    t = param.dtype.type
    b1, b2, one = t(beta1), t(beta2), t(1.0)
    l2_, decay_, size, eps_, rb2 = t(l2), t(decay), t(step_size), t(eps), t(1.0 / bias2_sqrt)
    for i in range(param.size):
        p = param[i]
        g = grad[i] + l2_ * p
        # PyTorch's moments start at zero: at step 1 don't read possibly uninitialized ones.
        if first:
            mi = (one - b1) * g
            vi = (one - b2) * g * g
        else:
            mi = b1 * m[i] + (one - b1) * g
            vi = b2 * v[i] + (one - b2) * g * g
        m[i] = mi
        v[i] = vi
        param[i] = p * decay_ - size * mi / (math.sqrt(vi) * rb2 + eps_)


@fp16_uses_reference(position=2)
def sgd_step(
    step,
    grad,
    param,
    velocity,
    *,
    lr,
    momentum=0.0,
    weight_decay=0.0,
    dampening=0.0,
    nesterov=False,
):
    """PyTorch SGD; `step` (0-d int64) is the 1-based step, velocity is not read at step 1."""
    first = bool(step[()] == 1)
    hyper = float(lr), float(momentum), float(weight_decay), float(dampening), bool(nesterov)
    _sgd(grad.ravel("K"), param.ravel("K"), velocity.ravel("K"), first, *hyper)


def _adam_step(step, grad, param, m, v, lr, beta1, beta2, eps, l2, decay):
    """Shared body of adam_step/adamw_step: bias corrections are computed once, in float64."""
    t = int(step[()])
    step_size = lr / (1.0 - beta1**t)
    bias2_sqrt = math.sqrt(1.0 - beta2**t)
    hyper = tuple(float(h) for h in (step_size, beta1, beta2, eps, bias2_sqrt, l2, decay))
    _adam(grad.ravel("K"), param.ravel("K"), m.ravel("K"), v.ravel("K"), t == 1, hyper)


@fp16_uses_reference(position=2)
def adam_step(step, grad, param, m, v, *, lr, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0):
    """PyTorch Adam with L2 weight decay added to the gradient."""
    _adam_step(step, grad, param, m, v, lr, beta1, beta2, eps, weight_decay, 1.0)


@fp16_uses_reference(position=2)
def adamw_step(step, grad, param, m, v, *, lr, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0):
    """PyTorch AdamW: param *= 1 - lr*weight_decay, then the Adam update without L2."""
    _adam_step(step, grad, param, m, v, lr, beta1, beta2, eps, 0.0, 1.0 - lr * weight_decay)
