"""Graph layer: builders of the convolution ops and copy_intersection (NNTile's
argument names and order) and the high-level conv2d.

Shapes are WHCN, column-major: images [W, H, C, N], kernels [K_w, K_h, C_in, C_out].
"""

from __future__ import annotations

from .apply import apply, owner_graph
from .registry import op_error
from .conv_shape import conv_output_shape


def pair(value) -> tuple:
    """An int or a pair of ints as a tuple of two (other values pass on to the check)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return (value, value)
    return tuple(value) if isinstance(value, (list, tuple)) else value


def geometry(padding, stride, dilation) -> dict:
    return {"padding": pair(padding), "stride": pair(stride), "dilation": pair(dilation)}


def conv2d(x, c, name, padding=0, stride=1, dilation=1, alpha=1.0):
    """y = alpha * conv2d(x [W, H, C_in, N], c [K_w, K_h, C_in, C_out]), a new tensor
    [W_out, H_out, C_out, N] named `name`; padding, stride, dilation: an int or a pair."""
    return apply("conv2d_inplace", [x, c], [name], alpha=alpha, beta=0.0,
                 **geometry(padding, stride, dilation))


def conv2d_inplace(alpha, X, C, beta, Y, padding=(0, 0), stride=(1, 1),  # noqa: N803
                   dilation=(1, 1)):
    """Y = alpha * conv2d(X, C) + beta * Y (NNTile's conv2d_inplace)."""
    return apply("conv2d_inplace", [X, C], [Y], alpha=alpha, beta=beta,
                 **geometry(padding, stride, dilation))


def require_existing(op, given, operands):
    if isinstance(given, str):
        raise op_error(op, f"output {given!r} must be an existing tensor (with stride > 1 "
                       "its shape is not implied by the inputs)", operands)


def check_shape(op, expected, tensor, operands):
    """`tensor` must have the shape the convolution's geometry implies."""
    if tuple(tensor.shape) != tuple(expected):
        raise op_error(op, f"{tensor.name} {list(tensor.shape)} does not match the geometry "
                       f"(expected {list(expected)})", operands)


def conv2d_bwd_input_inplace(alpha, dY, C, beta, dX, padding=(0, 0), stride=(1, 1),  # noqa: N803
                             dilation=(1, 1)):
    """dX = alpha * (gradient of conv2d(X, C) w.r.t. X, applied to dY) + beta * dX."""
    op, attrs = "conv2d_bwd_input_inplace", geometry(padding, stride, dilation)
    owner_graph(op, (dY, C), ())
    require_existing(op, dX, (dY, C))
    check_shape(op, conv_output_shape(op, attrs, dX, C), dY, (dY, C, dX))
    return apply(op, [dY, C], [dX], alpha=alpha, beta=beta, **attrs)


def conv2d_bwd_weight_inplace(alpha, X, dY, beta, dC, padding=(0, 0), stride=(1, 1),  # noqa: N803
                              dilation=(1, 1)):
    """dC = alpha * (gradient of conv2d(X, C) w.r.t. C, applied to dY) + beta * dC."""
    op, attrs = "conv2d_bwd_weight_inplace", geometry(padding, stride, dilation)
    owner_graph(op, (X, dY), ())
    require_existing(op, dC, (X, dY))
    check_shape(op, conv_output_shape(op, attrs, X, dC), dY, (X, dY, dC))
    return apply(op, [X, dY], [dC], alpha=alpha, beta=beta, **attrs)


def copy_intersection(src, src_offset, dst, dst_offset):
    """dst[i] = src[i] wherever both tensors, placed at their offsets in one coordinate
    space, overlap; dst elsewhere is left as it was (NNTile's copy_intersection)."""
    op = "copy_intersection"
    if isinstance(dst, str) or getattr(dst, "ndim", None) != getattr(src, "ndim", None):
        raise op_error(op, "dst must be an existing tensor with as many dims as src",
                       [t for t in (src, dst) if not isinstance(t, str)])
    if src.dtype != dst.dtype:
        raise op_error(op, "dtypes differ (no implicit casts; use cast)", (src, dst), TypeError)
    return apply(op, [src], [dst], src_offset=tuple(src_offset), dst_offset=tuple(dst_offset))
