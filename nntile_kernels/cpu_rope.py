"""Numba kernels of rope and rope_backward for the cpu table (scale_slice is a rule of
rules_broadcast.py, its loop generated into cpu_rules_broadcast.py).

Arrays only: never imports nntile_spmd, mpi4py or cupy. src is folded F-order to
(head_dim, rest, broadcast) and the tables to (head_dim/2, rest); numba gets the
C-ordered transposed views (cpu_common.folded_t) and indexes them backwards. fp16
falls back to the NumPy reference.
"""

import math

from numba import njit

from .cpu_common import fp16_uses_reference, folded_t


def _views(sin, cos, x, y):
    half = sin.shape[0]
    rest = math.prod(sin.shape[1:])
    full = (2 * half, rest, x.size // max(2 * half * rest, 1))
    return (folded_t(sin, (half, rest)), folded_t(cos, (half, rest)),
            folded_t(x, full), folded_t(y, full))


@njit(cache=True, nogil=True)
def _rope(st, ct, xt, yt, sign, accumulate):
    """y[2i], y[2i+1] (+)= the pair rotated by +angle (sign 1) or -angle (sign -1)."""
    k, n, m = xt.shape
    for p in range(k):
        for j in range(n):
            for i in range(m // 2):
                s, c = sign * st[j, i], ct[j, i]
                a, b = xt[p, j, 2 * i], xt[p, j, 2 * i + 1]
                if accumulate:
                    yt[p, j, 2 * i] += c * a - s * b
                    yt[p, j, 2 * i + 1] += s * a + c * b
                else:
                    yt[p, j, 2 * i] = c * a - s * b
                    yt[p, j, 2 * i + 1] = s * a + c * b


@fp16_uses_reference(2)
def rope(sin, cos, src, dst):
    """dst[2i] = cos[i] src[2i] - sin[i] src[2i+1], dst[2i+1] = sin[i] src[2i] + cos[i] src[2i+1]"""
    if src.size:
        _rope(*_views(sin, cos, src, dst), 1.0, False)


@fp16_uses_reference(2)
def rope_backward(sin, cos, dy, dx):
    """dx += the transposed rotation of dy (the rotation's inverse)."""
    if dy.size:
        _rope(*_views(sin, cos, dy, dx), -1.0, True)
