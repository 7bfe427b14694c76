"""Graph layer: builders of randn and dropout, re-exported by `nntile_spmd.ops`.
"""

from __future__ import annotations

from ..apply import apply
from ..registry import op_error
from ..tensor import TensorNode


# -- random numbers ---------------------------------------------------------------------
def randn(dst, seed, mean=0.0, stddev=1.0, start=None, underlying_shape=None):
    """dst = mean + stddev * N(0, 1): the block of dst's shape at `start` (default 0s) of a
    normal tensor of `underlying_shape` (default dst's shape) keyed by the int `seed`
    (NNTile's randn). Element i (F-order) of that tensor is always the same number, on
    any tiling and rank count."""
    check_randn(dst, seed, start, underlying_shape)
    return apply("randn", [], [dst], seed=seed, mean=mean, stddev=stddev,
                 start=None if start is None else tuple(start),
                 underlying_shape=None if underlying_shape is None else tuple(underlying_shape))


def check_randn(dst, seed, start, underlying_shape):
    if not isinstance(dst, TensorNode):
        raise op_error("randn", f"dst must be an existing tensor, not {dst!r}", (), TypeError)
    tensors = (dst,)
    if not isinstance(seed, int) or seed < 0:
        raise op_error("randn", f"seed={seed!r} must be an int >= 0", tensors)
    start = (0,) * dst.ndim if start is None else tuple(start)
    whole = dst.shape if underlying_shape is None else tuple(underlying_shape)
    if len(start) != dst.ndim or len(whole) != dst.ndim:
        raise op_error("randn", f"start={start} and underlying_shape={whole} must have "
                       f"{dst.ndim} entries", tensors)
    if any(s < 0 or s + size > w for s, size, w in zip(start, dst.shape, whole)):
        raise op_error("randn", f"the block at start={start} does not fit in "
                       f"underlying_shape={whole}", tensors)


def dropout(x, name, p, seed, step=0.0):
    """y = x / (1 - p) where a uniform number keyed by (seed, step) and the element's index
    in x exceeds p, else 0 (inverted dropout). The mask is a function of that index, so
    every tiling and rank count draws the same one, and backward draws it again. `p` and
    `step` may be runtime Scalars (a training loop changes the step between executes and
    switches dropout off with p = 0, which is the identity); `seed` tells the dropout
    sites of one graph apart. y keeps x's block-sparse (causal) structure."""
    check_dropout(x, p, seed, step)
    y = apply("dropout", [x], [name], p=p, seed=seed, step=step)
    y.causal_dims = x.causal_dims
    return y


def check_dropout(x, p, seed, step):
    tensors = (x,) if isinstance(x, TensorNode) else ()
    if not isinstance(x, TensorNode):
        raise op_error("dropout", f"x must be a tensor, not {x!r}", tensors, TypeError)
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise op_error("dropout", f"seed={seed!r} must be an int >= 0", tensors)
    for what, value in (("p", p), ("step", step)):
        default = getattr(value, "default", value) * getattr(value, "factor", 1.0)
        if isinstance(default, bool) or not isinstance(default, (int, float)):
            raise op_error("dropout", f"{what}={value!r} must be a float or a Scalar",
                           tensors, TypeError)
    factor = getattr(p, "factor", None)
    if not 0.0 <= (p if factor is None else factor) < 1.0:
        raise op_error("dropout", f"p={p!r} must be in [0, 1) (a Scalar: its factor, the "
                       "largest p it can give when its value is 1)", tensors)
