"""NumPy reference kernels of rotary position embeddings (NNTile's rope and
rope_backward) and of scale_slice (a slice broadcast along one axis).

Part of the reference table (reference.py imports these). Arrays only: imports NumPy,
never nntile_spmd, mpi4py, numba or cupy. Same calling convention as reference.py.
rope's src is [head_dim, rest..., broadcast...] and its tables sin, cos are
[head_dim/2, rest...]; the pair (src[2i], src[2i+1]) is rotated by sin[i], cos[i].
"""

import numpy as np


def pairs(tile, tables):
    """(even, odd) views of `tile` folded F-order to (2, head_dim/2, rest, broadcast),
    where `rest` spans the tables' dims 1...: no copies for an F-contiguous tile."""
    rest = int(np.prod(tables.shape[1:]))
    folded = tile.reshape((2, tables.shape[0], rest, -1), order="F")
    return folded[0], folded[1]


def table(values):
    """The table folded to (head_dim/2, rest, 1), broadcast over src's trailing dims."""
    return values.reshape((values.shape[0], -1, 1), order="F")


def rope(sin, cos, src, dst):
    """dst[2i] = cos[i] src[2i] - sin[i] src[2i+1], dst[2i+1] = sin[i] src[2i] + cos[i] src[2i+1]"""
    s, c = table(sin), table(cos)
    even, odd = pairs(src, sin)
    new_even, new_odd = c * even - s * odd, s * even + c * odd
    out_even, out_odd = pairs(dst, sin)
    out_even[...] = new_even
    out_odd[...] = new_odd


def rope_backward(sin, cos, dy, dx):
    """dx += the transposed rotation of dy (the rotation's inverse)."""
    s, c = table(sin), table(cos)
    even, odd = pairs(dy, sin)
    grad_even, grad_odd = c * even + s * odd, c * odd - s * even
    out_even, out_odd = pairs(dx, sin)
    out_even += grad_even
    out_odd += grad_odd


def scale_slice(src, dst, *, alpha, axis):
    """dst = alpha * src broadcast along `axis` (dst's axis is absent from src)."""
    dst[...] = alpha * np.expand_dims(src, axis)
