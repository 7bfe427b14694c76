"""Graph layer: builders of rope, rope_backward and scale_slice, re-exported by
`nntile_spmd.ops`.
"""

from __future__ import annotations

from ..apply import apply
from ..registry import op_error
from ..tensor import TensorNode


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
