"""Graph layer: batch_norm, a composite of the fiber ops (seed 003's BatchNorm),
re-exported by `nntile_spmd.ops`.

Training mode, as torch.nn.BatchNorm computes its output: every channel (the dim
`axis`) is normalized with the mean and biased variance of its entries over all the
other dims (batch and spatial). The statistics are fiber reductions, so those dims
may be split over tiles and ranks (DDP's batch split): partial sums merge across
ranks like layer_norm's, and nt.grad differentiates through the ops' rules.
"""

from __future__ import annotations

import math

from .apply import apply
from .ops_norm import check_norm, multiply_fiber, pow, sumprod_fiber
from .registry import op_error

BATCH_NORM_PARTS = ("mean", "centered", "var", "rstd", "normalized", "scaled")


def batch_norm(x, gamma, beta, name, axis=0, eps=1e-5):
    """y = (x - mean) / sqrt(var + eps) * gamma + beta per channel along `axis`, with mean
    and biased var over every other dim; gamma and beta are [x.shape[axis]].

    Intermediates are named f"{name}_{part}" for part in BATCH_NORM_PARTS (the batch
    statistics are {name}_mean and {name}_var, var + eps after the op).
    """
    check_batch_norm(x, gamma, beta, name, axis, eps)
    parts = {part: f"{name}_{part}" for part in BATCH_NORM_PARTS}
    inverse_n = x.shape[axis] / math.prod(x.shape)   # 1 / (elements per channel)
    mean = apply("sum_fiber", [x], [parts["mean"]], axis=axis, batch_ndim=0, redux=0,
                 alpha=inverse_n, beta=0.0)
    centered = apply("add_fiber", [mean, x], [parts["centered"]], axis=axis, batch_ndim=0,
                     alpha=-1.0, beta=1.0)
    # two passes (center, then square), as layer_norm: E[x^2] - mean^2 cancels badly
    var = sumprod_fiber(centered, centered, parts["var"], axis, alpha=inverse_n)
    # += eps in place on the [C] fiber: add_scalar has no inputs, so nt.grad never
    # visits it, and pow's rule (the only reader of var) runs after the shift
    apply("add_scalar", [], [var], value=eps)
    rstd = pow(var, parts["rstd"], exp=-0.5)
    normalized = multiply_fiber(rstd, centered, parts["normalized"], axis)
    scaled = multiply_fiber(gamma, normalized, parts["scaled"], axis)
    return apply("add_fiber", [beta, scaled], [name], axis=axis, batch_ndim=0, alpha=1.0,
                 beta=1.0)


def check_batch_norm(x, gamma, beta, name, axis, eps):
    """Every mistake raises before any op is added (the graph is left as is)."""
    check_norm("batch_norm", x, (gamma, beta), name, axis, eps, BATCH_NORM_PARTS)
    if x.ndim < 2:
        raise op_error("batch_norm", f"{x.name} needs a dim besides the channel axis to "
                       "take statistics over", (x, gamma, beta))
    if not all(isinstance(size, int) for size in x.shape):
        raise op_error("batch_norm", f"{x.name} must have concrete sizes (bind its "
                       "symbols first): the statistics divide by the count", (x, gamma, beta))
