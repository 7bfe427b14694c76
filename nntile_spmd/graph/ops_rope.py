"""Graph layer: builders of Llama's ops (rope, rope_backward, scale_slice and the
rms_norm composite), re-exported by `nntile_spmd.ops`. Rules in rules_rope.py.
"""

from __future__ import annotations


from .apply import apply
from .ops_norm import check_norm, multiply_fiber, pow
from .ops_slice import multiply_slice, sumprod_slice
from .registry import op_error
from .tensor import TensorNode


def rope(sin, cos, src, name):
    """dst = src with each pair (src[2i], src[2i+1]) rotated (NNTile's rope):

        dst[2i]   = cos[i] * src[2i] - sin[i] * src[2i+1]
        dst[2i+1] = sin[i] * src[2i] + cos[i] * src[2i+1]

    sin, cos: [head_dim/2, rest...]; src: [head_dim, rest..., broadcast...], the
    tables broadcast over src's trailing dims (heads). Dim 0 stays in one tile.
    """
    return apply("rope", [sin, cos, src], [name])


def rope_backward(sin, cos, dy, dx):
    """dx += the inverse rotation of dy (rope's gradient; sin and cos as in rope)."""
    return apply("rope_backward", [sin, cos, dy], [dx])


def scale_slice(alpha, src, dst, axis=0, size=None):
    """dst = alpha * src broadcast along `axis` (NNTile's scale_slice).

    dst is an existing tensor, or the name of a new one with `size` the length of the
    broadcast axis (src's shape with `size` inserted at `axis`).
    """
    if isinstance(dst, TensorNode):
        if not isinstance(axis, int) or not 0 <= axis < dst.ndim:
            raise op_error("scale_slice", f"axis={axis!r} out of range for {dst.ndim} dims",
                           (src, dst))
        size = dst.shape[axis] if size is None else size
    elif size is None:
        raise op_error("scale_slice", f"a new output {dst!r} needs size=, the length of "
                       "the broadcast axis", (src,), TypeError)
    return apply("scale_slice", [src], [dst], alpha=alpha, axis=axis, size=size)


RMS_NORM_PARTS = ("meansq", "rstd", "normalized")


def rms_norm(x, gamma, name, axis=0, eps=1e-6):
    """y = x / sqrt(mean(x**2) + eps) * gamma along `axis`, as transformers' LlamaRMSNorm
    (its fp32 upcast aside: here the arithmetic is in x's dtype); gamma is [x.shape[axis]].

    Emitted as primitive ops (sumprod_slice, add_scalar, pow, multiply_slice,
    multiply_fiber), so the axis may be split over tiles and ranks and nt.grad
    differentiates it through their rules. Intermediates are named f"{name}_{part}"
    for part in RMS_NORM_PARTS.
    """
    check_norm("rms_norm", x, (gamma,), name, axis, eps, RMS_NORM_PARTS)
    parts = {part: f"{name}_{part}" for part in RMS_NORM_PARTS}
    meansq = sumprod_slice(x, x, parts["meansq"], axis, alpha=1.0 / x.shape[axis])
    # in place on the small slice: a shift has derivative 1, so pow's rule, which reads
    # the shifted value, is all the backward pass needs (as in layer_norm)
    apply("add_scalar", [], [meansq], value=eps)
    rstd = pow(meansq, parts["rstd"], exp=-0.5)
    normalized = multiply_slice(rstd, x, parts["normalized"], axis)
    return multiply_fiber(gamma, normalized, name, axis)


