"""The numba SGD step (PyTorch semantics) of the cpu table; Adam and AdamW are loops
generated from their rules (rules.UPDATES, cpu_rules.py).

Arrays only: never imports nntile_spmd, mpi4py or cupy. One fused pass over the
flat tiles per step; hyperparameters are cast to the tile dtype like NumPy does.
fp16 falls back to the NumPy reference.
"""

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
