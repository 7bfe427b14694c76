"""The reference kernels of LayerNorm's primitives (slice and fiber ops, pow) against
independent formulas: einsum, explicit loops, finite differences. The backends are
compared with these references in test_kernels_table.py."""

import itertools

import numpy as np
import pytest

from nntile_kernels import reference as ref

RNG = np.random.default_rng(77)


def randn(*shape):
    return np.array(RNG.standard_normal(shape), order="F")


def garbage(*shape):
    return np.full(shape, np.nan, order="F")


SUBSCRIPTS = "abcd"


@pytest.mark.parametrize("axis", [0, 1, 2, 3])
def test_slice_ops_match_einsum(axis):
    """sum_slice reduces `axis`; add_slice and multiply_slice broadcast a slice along it."""
    shape = (2, 3, 4, 5)
    full = SUBSCRIPTS
    part = full.replace(full[axis], "")
    x = randn(*shape)
    s_shape = shape[:axis] + shape[axis + 1:]
    s = randn(*s_shape)
    expected = 0.5 * np.einsum(f"{full}->{part}", x) - 2.0 * s
    ref.sum_slice(x, s, axis=axis, alpha=0.5, beta=-2.0)
    np.testing.assert_allclose(s, expected, rtol=1e-12)
    z = garbage(*shape)
    ones = np.ones(shape)
    ref.add_slice(s, x, z, axis=axis, alpha=1.5, beta=-0.5)
    spread = np.einsum(f"{part},{full}->{full}", s, ones)
    np.testing.assert_allclose(z, 1.5 * spread - 0.5 * x, rtol=1e-12)
    ref.multiply_slice(s, x, z, axis=axis, alpha=-3.0)
    np.testing.assert_allclose(z, -3.0 * np.einsum(f"{part},{full}->{full}", s, x), rtol=1e-12)


FIBER_CASES = [(axis, batch_ndim) for axis, batch_ndim in itertools.product(range(4), range(3))
               if axis < 4 - batch_ndim]


@pytest.mark.parametrize("axis, batch_ndim", FIBER_CASES)
def test_fiber_products_match_einsum(axis, batch_ndim):
    """A fiber holds `axis` and the trailing batch dims: f[j, batch...]."""
    shape = (2, 3, 4, 5)
    full = SUBSCRIPTS
    fiber = full[axis] + full[4 - batch_ndim:]
    x, y = randn(*shape), randn(*shape)
    f = randn(*(shape[full.index(c)] for c in fiber))
    z = garbage(*shape)
    ref.multiply_fiber(f, x, z, axis=axis, batch_ndim=batch_ndim, alpha=0.5)
    np.testing.assert_allclose(z, 0.5 * np.einsum(f"{fiber},{full}->{full}", f, x), rtol=1e-12)
    dx = randn(*shape)
    expected = dx - 2.0 * np.einsum(f"{fiber},{full}->{full}", f, x)
    ref.sumprod_fiber_backward(f, x, dx, axis=axis, batch_ndim=batch_ndim, alpha=-2.0)
    np.testing.assert_allclose(dx, expected, rtol=1e-12)
    expected = 2.0 * np.einsum(f"{full},{full}->{fiber}", x, y) + 0.5 * f
    ref.sumprod_fiber(x, y, f, axis=axis, batch_ndim=batch_ndim, alpha=2.0, beta=0.5)
    np.testing.assert_allclose(f, expected, rtol=1e-12)


def test_slice_and_fiber_reductions_do_not_read_the_output_when_beta_is_zero():
    x = randn(3, 4, 2)
    s = garbage(3, 2)
    ref.sum_slice(x, s, axis=1)
    np.testing.assert_allclose(s, x.sum(axis=1), rtol=1e-12)
    f = garbage(4)
    ref.sumprod_fiber(x, x, f, axis=1)
    np.testing.assert_allclose(f, (x * x).sum(axis=(0, 2)), rtol=1e-12)


@pytest.mark.parametrize("exp", [-0.5, 0.5, 1.0, 2.0, -1.5, 3.0])
def test_pow_matches_math_and_its_backward_finite_differences(exp):
    """y = alpha * x**exp element by element; dx += d/dx(alpha * x**exp) * dy."""
    x = RNG.uniform(0.5, 2.0, 7)
    y = garbage(7)
    ref.pow(x, y, alpha=-1.5, exp=exp)
    np.testing.assert_allclose(y, [-1.5 * v**exp for v in x], rtol=1e-14)
    dy, dx = randn(7), randn(7)
    h = 1e-6
    plus, minus = np.empty(7), np.empty(7)
    ref.pow(x + h, plus, alpha=-1.5, exp=exp)
    ref.pow(x - h, minus, alpha=-1.5, exp=exp)
    expected = dx + (plus - minus) / (2 * h) * dy
    ref.pow_backward(x, dy, dx, alpha=-1.5, exp=exp)
    np.testing.assert_allclose(dx, expected, rtol=1e-6, atol=1e-8)
