"""The NumPy reference of the slice, attention and cross-entropy kernels against
independent formulas (einsum, SciPy, finite differences), in float64.

The split-axis contracts are checked here at the kernel level: a slice reduction
computed tile by tile along its axis, with beta=1 and with the plan's merge kernel,
equals the reduction of the whole.
"""

import numpy as np
import pytest
import scipy.special

from nntile_kernels import reference as ref

RNG = np.random.default_rng(99)


def randn(*shape):
    return np.array(RNG.standard_normal(shape), order="F")


def garbage(*shape):
    return np.full(shape, np.nan, order="F")


def masked(*shape, fraction=0.3):
    """randn with some -inf and a whole slice along axis 0 of -inf (column 0)."""
    values = randn(*shape)
    values[RNG.random(shape) < fraction] = -np.inf
    values[:, 0] = -np.inf
    return values


def chunks(x, axis, bounds):
    """Uneven tiles of x along `axis`, split at `bounds`."""
    return np.split(x, bounds, axis=axis)


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_sumprod_slice_matches_einsum_and_adds_over_tiles(axis):
    x, y = randn(4, 5, 3), randn(4, 5, 3)
    letters = "ijk"
    expected = np.einsum(f"ijk,ijk->{letters.replace(letters[axis], '')}", x, y)
    whole = garbage(*np.delete(x.shape, axis))
    ref.sumprod_slice(x, y, whole, axis=axis, alpha=2.0)
    np.testing.assert_allclose(whole, 2.0 * expected, rtol=1e-13)
    tiled = garbage(*whole.shape)
    for index, (x_tile, y_tile) in enumerate(zip(chunks(x, axis, [1, 3]),
                                                 chunks(y, axis, [1, 3]))):
        ref.sumprod_slice(x_tile, y_tile, tiled, axis=axis, beta=float(index > 0))
    np.testing.assert_allclose(tiled, expected, rtol=1e-13)


def test_sumprod_slice_backward_matches_finite_differences():
    x, y, s = randn(3, 4, 2), randn(3, 4, 2), randn(3, 2)
    grad = np.zeros_like(x)
    ref.sumprod_slice_backward(s, y, grad, axis=1, alpha=0.5)

    def loss(x_value):
        z = np.empty((3, 2))
        ref.sumprod_slice(x_value, y, z, axis=1, alpha=0.5)
        return float((z * s).sum())
    numeric = finite_differences(loss, x)
    np.testing.assert_allclose(grad, numeric, rtol=1e-7, atol=1e-8)


def finite_differences(function, x, eps=1e-6):
    numeric = np.zeros_like(x)
    for index in np.ndindex(x.shape):
        plus, minus = x.copy(), x.copy()
        plus[index] += eps
        minus[index] -= eps
        numeric[index] = (function(plus) - function(minus)) / (2 * eps)
    return numeric


@pytest.mark.parametrize("axis", [0, 1])
def test_logsumexp_over_tiles_with_beta_and_with_the_merge_kernel(axis):
    """Tile by tile with beta=1, or per tile and merged pairwise by logsumexp_merge:
    both equal SciPy's logsumexp of the whole, -inf where a slice is all -inf."""
    x = 30.0 * masked(6, 4)
    with np.errstate(divide="ignore"):
        expected = scipy.special.logsumexp(x, axis=axis)
    tiles = chunks(x, axis, [2, 3])
    running = garbage(*expected.shape)
    for index, tile in enumerate(tiles):
        ref.logsumexp(tile, running, axis=axis, beta=float(index > 0))
    np.testing.assert_allclose(running, expected, rtol=1e-13)
    partials = [garbage(*expected.shape) for _ in tiles]
    for tile, partial in zip(tiles, partials):
        ref.logsumexp(tile, partial, axis=axis)
    merged = partials[0]
    for partial in partials[1:]:
        ref.logsumexp_merge(partial, merged, merged, alpha=1.0, beta=1.0)
    np.testing.assert_allclose(merged, expected, rtol=1e-13)
    if axis == 0:
        assert merged[0] == -np.inf and not np.isnan(merged).any()


def test_logsumexp_beta_and_merge_coefficients():
    """y = log(exp(lse) + beta exp(y)); merge: log(alpha exp(x) + beta exp(y))."""
    x, y = randn(5, 3), randn(3)
    out = y.copy()
    ref.logsumexp(x, out, axis=0, beta=0.25)
    np.testing.assert_allclose(out, np.log(np.exp(x).sum(axis=0) + 0.25 * np.exp(y)),
                               rtol=1e-13)
    a, b, z = randn(4), randn(4), garbage(4)
    ref.logsumexp_merge(a, b, z, alpha=0.5, beta=3.0)
    np.testing.assert_allclose(z, np.log(0.5 * np.exp(a) + 3.0 * np.exp(b)), rtol=1e-13)
    ref.logsumexp_merge(a, garbage(4), z, alpha=2.0, beta=0.0)   # y unread
    np.testing.assert_allclose(z, a + np.log(2.0), rtol=1e-13)


def test_logsumexp_backward_is_softmax_times_dy_and_zero_where_masked():
    x = masked(5, 3)
    y, dy = garbage(3), randn(3)
    ref.logsumexp(x, y, axis=0)
    dx = np.zeros_like(x)
    ref.logsumexp_backward(x, y, dy, dx, axis=0)
    live = x[:, 1:]
    np.testing.assert_allclose(dx[:, 1:], scipy.special.softmax(live, axis=0) * dy[1:],
                               rtol=1e-13)
    assert not dx[:, 0].any() and not dx[np.isneginf(x)].any()


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_softmax_from_logsumexp_is_softmax_and_its_backward_matches_finite_differences(axis):
    x = 20.0 * randn(3, 4, 2)
    lse = garbage(*np.delete(x.shape, axis))
    ref.logsumexp(x, lse, axis=axis)
    y = garbage(*x.shape)
    ref.softmax_from_logsumexp(lse, x, y, axis=axis)
    np.testing.assert_allclose(y, scipy.special.softmax(x, axis=axis), rtol=1e-12, atol=1e-300)
    x = randn(3, 4, 2)
    weights = randn(3, 4, 2)

    def loss(x_value):
        lse_value, y_value = garbage(*lse.shape), garbage(*x.shape)
        ref.logsumexp(x_value, lse_value, axis=axis)
        ref.softmax_from_logsumexp(lse_value, x_value, y_value, axis=axis)
        return float((y_value * weights).sum())
    ref.logsumexp(x, lse, axis=axis)
    ref.softmax_from_logsumexp(lse, x, y, axis=axis)
    dot = garbage(*lse.shape)
    ref.sumprod_slice(y, weights, dot, axis=axis)
    dx = np.zeros_like(x)
    ref.softmax_from_logsumexp_backward(y, weights, dot, dx, axis=axis)
    np.testing.assert_allclose(dx, finite_differences(loss, x), rtol=1e-7, atol=1e-9)


def test_softmax_from_logsumexp_gives_zero_where_masked():
    x = masked(5, 3)[:, 1:]        # every column keeps at least its unmasked entries
    x[0] = 0.5
    lse = garbage(2)
    ref.logsumexp(x, lse, axis=0)
    y = garbage(5, 2)
    ref.softmax_from_logsumexp(lse, x, y, axis=0)
    assert not y[np.isneginf(x)].any()
    np.testing.assert_allclose(y.sum(axis=0), 1.0, rtol=1e-14)


def test_cross_entropy_lse_over_class_tiles_is_the_mean_over_kept_labels():
    """Partial losses of uneven class tiles (and two batch tiles) add up to the mean of
    -log softmax(logits)[label] over the labels that are not ignore_index, and the
    backward of each class tile is that tile's rows of the whole gradient."""
    classes, positions = 7, 6
    logits = randn(classes, positions)
    labels = np.array([6, -100, 0, 3, -100, 5])
    kept = labels != -100
    lse = garbage(positions)
    ref.logsumexp(logits, lse, axis=0)
    count = garbage()
    ref.valid_count(labels, count, ignore_index=-100)
    assert count == 4
    log_probs = logits - scipy.special.logsumexp(logits, axis=0)
    expected = -log_probs[labels[kept], np.flatnonzero(kept)].mean()
    loss, first = garbage(), True
    for rows in (slice(0, 3), slice(3, 6), slice(6, 7)):
        for columns in (slice(0, 4), slice(4, 6)):
            ref.cross_entropy_lse(logits[rows, columns], lse[columns], labels[columns], count,
                                  loss, num_classes=classes, class_offset=rows.start,
                                  beta=0.0 if first else 1.0)
            first = False
    np.testing.assert_allclose(loss, expected, rtol=1e-13)
    whole = np.zeros_like(logits)
    dloss = np.array(1.5)
    ref.cross_entropy_lse_backward(logits, lse, labels, count, dloss, whole, num_classes=classes)
    probs = scipy.special.softmax(logits, axis=0)
    onehot = np.arange(classes)[:, None] == labels[None]
    np.testing.assert_allclose(whole, 1.5 / 4 * kept * (probs - onehot), rtol=1e-13)
    tiled = np.zeros_like(logits)
    for rows in (slice(0, 3), slice(3, 6), slice(6, 7)):
        ref.cross_entropy_lse_backward(logits[rows], lse, labels, count, dloss, tiled[rows],
                                       num_classes=classes, class_offset=rows.start)
    np.testing.assert_allclose(tiled, whole, rtol=1e-15)
