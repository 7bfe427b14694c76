"""The rope reference kernels against their definition written as loops (NNTile's
pair convention), and rope_backward as rope's transpose; the fast backends are
checked against the reference in test_kernels_table.py."""

import numpy as np
import pytest

from nntile_kernels import reference

RNG = np.random.default_rng(3)


def rope_by_loops(sin, cos, src):
    dst = np.empty_like(src)
    for index in np.ndindex(src.shape):
        i, rest = index[0] // 2, index[1:sin.ndim]
        s, c = sin[(i, *rest)], cos[(i, *rest)]
        a, b = src[(2 * i, *index[1:])], src[(2 * i + 1, *index[1:])]
        dst[index] = c * a - s * b if index[0] % 2 == 0 else s * a + c * b
    return dst


@pytest.mark.parametrize("table_shape, src_shape", [((3,), (6,)), ((2, 5), (4, 5, 3)),
                                                    ((3, 4, 2), (6, 4, 2, 2, 3))])
def test_rope_matches_its_definition(table_shape, src_shape):
    angle = RNG.uniform(-3, 3, table_shape)
    sin, cos = np.asfortranarray(np.sin(angle)), np.asfortranarray(np.cos(angle))
    src = np.asfortranarray(RNG.standard_normal(src_shape))
    dst = np.asfortranarray(np.full(src_shape, np.nan))
    reference.rope(sin, cos, src, dst)
    np.testing.assert_allclose(dst, rope_by_loops(sin, cos, src), rtol=1e-14, atol=1e-14)


def test_rope_backward_is_the_transpose_and_accumulates():
    angle = RNG.uniform(-3, 3, (2, 5))
    sin, cos = np.asfortranarray(np.sin(angle)), np.asfortranarray(np.cos(angle))
    x, dy = (np.asfortranarray(RNG.standard_normal((4, 5, 3))) for _ in range(2))
    y = np.asfortranarray(np.zeros_like(x))
    reference.rope(sin, cos, x, y)
    start = np.asfortranarray(RNG.standard_normal(x.shape))
    dx = start.copy(order="F")
    reference.rope_backward(sin, cos, dy, dx)
    # <R x, dy> = <x, R^T dy>, and the old dx is kept
    np.testing.assert_allclose(np.vdot(y, dy), np.vdot(x, dx - start), rtol=1e-12)
    back = np.asfortranarray(np.zeros_like(x))
    reference.rope_backward(sin, cos, y, back)   # R^T R = I
    np.testing.assert_allclose(back, x, rtol=1e-12, atol=1e-12)
