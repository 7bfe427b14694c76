"""Graph layer: the convolutions' output-shape rule (shared with rules.py) and their
builders with NNTile's argument names and order, re-exported by `nntile_spmd.ops`.

Shapes are WHCN, column-major: images [W, H, C, N], kernels [K_w, K_h, C_in, C_out].
"""

from __future__ import annotations

from ..apply import apply, owner_graph
from ..checks import require_float, require_same_dtype
from ..registry import op_error


def conv_geometry(op, attrs, tensors):
    """(padding, stride, dilation) as int pairs, checked."""
    checked = []
    for key, low in (("padding", 0), ("stride", 1), ("dilation", 1)):
        value = attrs[key]
        if not (isinstance(value, tuple) and len(value) == 2 and
                all(isinstance(v, int) and v >= low for v in value)):
            raise op_error(op, f"{key}={value!r} must be a pair of ints >= {low}", tensors)
        checked.append(value)
    return tuple(checked)


def conv_out_size(size, kernel, padding, stride, dilation):
    """Output length of a convolution along one axis (NNTile's and PyTorch's formula)."""
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


def conv_output_shape(op, attrs, x, c):
    """Y's shape [W_out, H_out, C_out, N] for input x and kernel c, checked."""
    require_float(op, x, c)
    require_same_dtype(op, x, c)
    padding, stride, dilation = conv_geometry(op, attrs, (x, c))
    if x.ndim != 4 or c.ndim != 4:
        raise op_error(op, f"{x.name} must be [W, H, C_in, N] and {c.name} "
                       "[K_w, K_h, C_in, C_out]", (x, c))
    if not all(isinstance(d, int) for d in x.shape[:3] + c.shape):
        raise op_error(op, "spatial and channel dims must be concrete ints", (x, c))
    if x.shape[2] != c.shape[2]:
        raise op_error(op, f"input channels differ ({x.shape[2]} != {c.shape[2]})", (x, c))
    spatial = tuple(conv_out_size(x.shape[i], c.shape[i], padding[i], stride[i], dilation[i])
                    for i in range(2))
    if min(spatial) < 1:
        raise op_error(op, f"kernel {list(c.shape[:2])} with padding {list(padding)} and "
                       f"dilation {list(dilation)} is larger than the image", (x, c))
    return spatial + (c.shape[3], x.shape[3])


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
