"""xp-generic kernels of rotary position embeddings (NNTile's rope and rope_backward;
scale_slice, a slice broadcast along one axis, is a rule of rules_broadcast.py).

Part of generic.table. Arrays only: never imports nntile_spmd, mpi4py, numba or cupy.
rope's src is [head_dim, rest..., broadcast...] and its tables sin, cos are
[head_dim/2, rest...]; the pair (src[2i], src[2i+1]) is rotated by sin[i], cos[i].
The F-order folds below are views of F-contiguous tiles in NumPy and CuPy alike.
"""

import math


def pairs(tile, tables):
    """(even, odd) views of `tile` folded F-order to (2, head_dim/2, rest, broadcast),
    where `rest` spans the tables' dims 1...: no copies for an F-contiguous tile."""
    rest = math.prod(tables.shape[1:])
    folded = tile.reshape((2, tables.shape[0], rest, -1), order="F")
    return folded[0], folded[1]


def table(values):
    """The table folded to (head_dim/2, rest, 1), broadcast over src's trailing dims."""
    return values.reshape((values.shape[0], -1, 1), order="F")


def rope(xp, sin, cos, src, dst):
    """dst[2i] = cos[i] src[2i] - sin[i] src[2i+1], dst[2i+1] = sin[i] src[2i] + cos[i] src[2i+1]"""
    s, c = table(sin), table(cos)
    even, odd = pairs(src, sin)
    new_even, new_odd = c * even - s * odd, s * even + c * odd
    out_even, out_odd = pairs(dst, sin)
    out_even[...] = new_even
    out_odd[...] = new_odd


def rope_backward(xp, sin, cos, dy, dx):
    """dx += the transposed rotation of dy (the rotation's inverse)."""
    s, c = table(sin), table(cos)
    even, odd = pairs(dy, sin)
    grad_even, grad_odd = c * even + s * odd, c * odd - s * even
    out_even, out_odd = pairs(dx, sin)
    out_even += grad_even
    out_odd += grad_odd
