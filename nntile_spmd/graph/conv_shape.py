"""Graph layer: the output shape of a 2-D convolution, checked.

Shared by the convolutions' rule table (rules_conv.py), whose conv2d_inplace infers Y
from it, and by their builders (ops_conv.py), which check a given dX or dC against it.
A module of its own so that builders never import a rule table (see registry.py).
"""

from __future__ import annotations

from .registry import op_error
from .rules_common import require_float, require_same_dtype


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
