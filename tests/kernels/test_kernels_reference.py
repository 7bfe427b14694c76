"""The NumPy reference against independent formulas: einsum, SciPy, loops, finite differences.

The backends are only as right as the reference they are compared with, so each
reference kernel is checked here in float64 by a route that shares no code with it.
"""

import itertools
import math

import numpy as np
import pytest
import scipy.special

from nntile_kernels import reference as ref

RNG = np.random.default_rng(1234)


def randn(*shape):
    """Random normal float64 tile in Fortran order (0-d stays 0-d)."""
    return np.array(RNG.standard_normal(shape), order="F")


def garbage(*shape):
    """A NaN-filled output tile: a kernel must not read it."""
    return np.full(shape, np.nan, order="F")


@pytest.mark.parametrize(
    ("trans_a", "trans_b", "ndim", "batch_ndim"), list(itertools.product([False, True], repeat=4))
)
def test_gemm_matches_einsum(trans_a, trans_b, ndim, batch_ndim):
    """All trans/ndim/batch combinations, with two M dims so the folding is exercised."""
    ndim += 1  # K dims: 1 or 2
    sizes = {"a": 3, "b": 2, "k": 4, "l": 2, "n": 5, "z": 3}
    m, k, n, z = "ab", "kl"[:ndim], "n", "z"[:batch_ndim]
    a_sub = (k + m if trans_a else m + k) + z
    b_sub = (n + k if trans_b else k + n) + z
    c_sub = m + n + z
    a, b, c = (randn(*(sizes[s] for s in sub)) for sub in (a_sub, b_sub, c_sub))
    expected = 0.5 * np.einsum(f"{a_sub},{b_sub}->{c_sub}", a, b) - 2.0 * c
    ref.gemm(
        a,
        b,
        c,
        alpha=0.5,
        beta=-2.0,
        trans_a=trans_a,
        trans_b=trans_b,
        ndim=ndim,
        batch_ndim=batch_ndim,
    )
    np.testing.assert_allclose(c, expected, rtol=1e-12, atol=1e-12)


def test_gemm_beta_zero_ignores_garbage():
    """beta == 0 writes C without reading it."""
    a, b, c = randn(4, 3), randn(3, 2), garbage(4, 2)
    ref.gemm(a, b, c, beta=0.0)
    np.testing.assert_allclose(c, a @ b, rtol=1e-12)


@pytest.mark.parametrize(
    ("shape", "ndim", "axes"), [((3, 4, 2), 1, (1, 2, 0)), ((3, 4, 2), 2, (2, 0, 1))]
)
def test_transpose_moves_leading_dims_to_the_end(shape, ndim, axes):
    """y[j..., i...] = alpha*x[i..., j...]."""
    x, y = randn(*shape), garbage(*(shape[a] for a in axes))
    ref.transpose(x, y, alpha=3.0, ndim=ndim)
    for index in np.ndindex(*shape):
        assert y[tuple(index[a] for a in axes)] == 3.0 * x[index]


UNARY = {
    "gelu": lambda v: 0.5 * v * (1.0 + math.erf(v / math.sqrt(2.0))),
    "gelutanh": lambda v: (
        0.5 * v * (1.0 + math.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v**3)))
    ),
    "relu": lambda v: max(v, 0.0),
    "silu": lambda v: v / (1.0 + math.exp(-v)),
    "sqrt": math.sqrt,
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_forward_matches_math(name):
    """Each activation equals its textbook formula element by element."""
    x = np.abs(randn(5, 3)) if name == "sqrt" else randn(5, 3)
    y = garbage(5, 3)
    ref.KERNELS[name](x, y)
    np.testing.assert_allclose(y, np.vectorize(UNARY[name])(x), rtol=1e-14, atol=1e-15)


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_backward_matches_finite_differences(name):
    """dx += f'(x)*dy, f' by central differences of the forward kernel."""
    x = np.abs(randn(7)) + 0.5 if name == "sqrt" else randn(7)
    x[np.abs(x) < 1e-3] = 0.5  # keep relu's kink out of the difference quotient
    dy, dx = randn(7), randn(7)
    h = 1e-6
    plus, minus = np.empty(7), np.empty(7)
    ref.KERNELS[name](x + h, plus)
    ref.KERNELS[name](x - h, minus)
    expected = dx + (plus - minus) / (2 * h) * dy
    ref.KERNELS[f"{name}_backward"](x, dy, dx)
    np.testing.assert_allclose(dx, expected, rtol=1e-6, atol=1e-8)


def test_relu_backward_is_zero_at_zero():
    """relu'(0) = 0: dx is unchanged where x == 0."""
    x, dy, dx = np.zeros(4), randn(4), randn(4)
    before = dx.copy()
    ref.relu_backward(x, dy, dx)
    np.testing.assert_array_equal(dx, before)


def test_sum_and_sum_fiber_match_einsum():
    """sum over everything; sum_fiber keeps `axis` and the trailing batch dims."""
    x = randn(2, 3, 4, 5)
    y = randn()
    expected = 0.5 * x.sum() + 2.0 * y
    ref.sum(x, y, alpha=0.5, beta=2.0)
    np.testing.assert_allclose(y, expected, rtol=1e-12)
    fiber = garbage(3, 4, 5)
    ref.sum_fiber(x, fiber, axis=1, batch_ndim=2, alpha=2.0)
    np.testing.assert_allclose(fiber, 2.0 * np.einsum("abcd->bcd", x), rtol=1e-12)
    fiber = randn(3)
    expected = np.einsum("abcd->b", x) - fiber
    ref.sum_fiber(x, fiber, axis=1, beta=-1.0)
    np.testing.assert_allclose(fiber, expected, rtol=1e-12)


def test_add_fiber_broadcasts_along_the_other_dims():
    """z[i, j, b] = alpha*x[j, b] + beta*y[i, j, b] (axis 1, one batch dim)."""
    x, y, z = randn(4, 2), randn(3, 4, 2), garbage(3, 4, 2)
    ref.add_fiber(x, y, z, axis=1, batch_ndim=1, alpha=2.0, beta=0.5)
    for i, j, b in np.ndindex(3, 4, 2):
        assert z[i, j, b] == pytest.approx(2.0 * x[j, b] + 0.5 * y[i, j, b])


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_softmax_family_matches_scipy(axis):
    """softmax, logsumexp and maxsumexp against SciPy, with large values (stability)."""
    x = 50.0 * randn(3, 4, 2)
    y = garbage(3, 4, 2)
    ref.softmax(x, y, axis=axis)
    np.testing.assert_allclose(y, scipy.special.softmax(x, axis=axis), rtol=1e-12, atol=1e-300)
    dropped = x.shape[:axis] + x.shape[axis + 1 :]
    y = garbage(*dropped)
    ref.logsumexp(x, y, axis=axis)
    np.testing.assert_allclose(y, scipy.special.logsumexp(x, axis=axis), rtol=1e-12)
    y = garbage(2, *dropped)
    ref.maxsumexp(x, y, axis=axis)
    np.testing.assert_allclose(y[0], x.max(axis=axis), rtol=1e-15)
    np.testing.assert_allclose(y[1] * np.exp(y[0]), np.exp(x).sum(axis=axis), rtol=1e-12)


def cross_entropy_by_loops(logits, labels):
    """sum over columns b of -log(softmax(logits[:, b])[labels[b]])."""
    total = 0.0
    for b in np.ndindex(labels.shape):
        column = logits[(slice(None), *b)]
        total -= math.log(math.exp(column[labels[b]]) / sum(math.exp(v) for v in column))
    return total


def test_cross_entropy_matches_loops_and_its_gradient():
    """Loss by explicit loops; backward by finite differences of the loss."""
    logits, labels = randn(5, 3, 2), RNG.integers(0, 5, (3, 2))
    loss = randn()
    expected = 0.5 * cross_entropy_by_loops(logits, labels) + 2.0 * loss
    ref.cross_entropy(logits, labels, loss, alpha=0.5, beta=2.0)
    np.testing.assert_allclose(loss, expected, rtol=1e-12)
    dloss, dlogits = np.array(1.5), randn(5, 3, 2)
    expected = dlogits + 0.5 * 1.5 * numeric_gradient(
        lambda v: cross_entropy_by_loops(v, labels), logits
    )
    ref.cross_entropy_backward(logits, labels, dloss, dlogits, alpha=0.5)
    np.testing.assert_allclose(dlogits, expected, rtol=1e-6, atol=1e-8)


def numeric_gradient(function, x, h=1e-6):
    """Central-difference gradient of a scalar function of an array."""
    grad = np.zeros_like(x)
    for index in np.ndindex(x.shape):
        step = np.zeros_like(x)
        step[index] = h
        grad[index] = (function(x + step) - function(x - step)) / (2 * h)
    return grad


def test_mse_and_its_gradient():
    """loss = alpha*sum((x-y)^2) + beta*loss; dx by finite differences."""
    x, y, loss = randn(4, 3), randn(4, 3), garbage()
    ref.mse(x, y, loss, alpha=0.5)
    np.testing.assert_allclose(loss, 0.5 * ((x - y) ** 2).sum(), rtol=1e-12)
    dx = randn(4, 3)
    expected = dx + 0.5 * 3.0 * numeric_gradient(lambda v: ((v - y) ** 2).sum(), x)
    ref.mse_backward(x, y, np.array(3.0), dx, alpha=0.5)
    np.testing.assert_allclose(dx, expected, rtol=1e-6, atol=1e-8)


def test_embedding_over_vocab_tiles_is_the_full_lookup():
    """Summing each vocab tile's lookup (beta=1 after the first) gives vocab[:, index]."""
    vocab, index = randn(4, 10), RNG.integers(0, 10, (2, 3))
    y = garbage(2, 3, 4)  # E at axis 2
    for start, stop in ((0, 3), (3, 7), (7, 10)):
        ref.embedding(
            index,
            np.asfortranarray(vocab[:, start:stop]),
            y,
            axis=2,
            vocab_size=10,
            vocab_offset=start,
            beta=0.0 if start == 0 else 1.0,
        )
    for i, j in np.ndindex(2, 3):
        np.testing.assert_array_equal(y[i, j, :], vocab[:, index[i, j]])


def test_embedding_backward_matches_a_loop():
    """Repeated indices accumulate; out-of-range indices are skipped; beta scales the old tile."""
    index = np.array([[1, 4, 1], [6, 2, 1]])
    dy, dvocab = randn(2, 4, 3), randn(4, 3)  # E = 4 at axis 1; this tile holds columns 1..3
    expected = 0.5 * dvocab
    for p, q in np.ndindex(2, 3):
        column = index[p, q] - 1
        if 0 <= column < 3:
            expected[:, column] += dy[p, :, q]
    ref.embedding_backward(index, dy, dvocab, axis=1, vocab_size=7, vocab_offset=1, beta=0.5)
    np.testing.assert_allclose(dvocab, expected, rtol=1e-12)


def torch_sgd(param, grads, lr, momentum, dampening, weight_decay, nesterov):
    """torch.optim.SGD's documented algorithm, transcribed."""
    buf = None
    for g in grads:
        g = g + weight_decay * param
        if momentum != 0:
            buf = g.copy() if buf is None else momentum * buf + (1 - dampening) * g
            g = g + momentum * buf if nesterov else buf
        param = param - lr * g
    return param


@pytest.mark.parametrize(
    ("momentum", "dampening", "weight_decay", "nesterov"),
    [
        (0.0, 0.0, 0.0, False),
        (0.9, 0.0, 0.01, False),
        (0.9, 0.1, 0.0, False),
        (0.8, 0.0, 0.1, True),
    ],
)
def test_sgd_matches_torch_algorithm(momentum, dampening, weight_decay, nesterov):
    """Four steps from an uninitialized velocity."""
    param, grads = randn(5), [randn(5) for _ in range(4)]
    expected = torch_sgd(param, grads, 0.1, momentum, dampening, weight_decay, nesterov)
    velocity, step = garbage(5), np.array(0)
    for g in grads:
        step += 1
        ref.sgd_step(
            step,
            g,
            param,
            velocity,
            lr=0.1,
            momentum=momentum,
            weight_decay=weight_decay,
            dampening=dampening,
            nesterov=nesterov,
        )
    np.testing.assert_allclose(param, expected, rtol=1e-12)


def torch_adam(param, grads, lr, beta1, beta2, eps, weight_decay, decoupled):
    """torch.optim.Adam / AdamW's documented algorithm (zero initial moments), transcribed."""
    m, v = np.zeros_like(param), np.zeros_like(param)
    for t, g in enumerate(grads, start=1):
        if decoupled:
            param = param * (1 - lr * weight_decay)
        else:
            g = g + weight_decay * param
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        step_size = lr / (1 - beta1**t)
        denom = np.sqrt(v) / math.sqrt(1 - beta2**t) + eps
        param = param - step_size * m / denom
    return param


@pytest.mark.parametrize("name", ["adam_step", "adamw_step"])
def test_adam_matches_torch_algorithm(name):
    """Five steps from uninitialized moments (step 1 must not read them)."""
    param, grads = randn(6), [randn(6) for _ in range(5)]
    hyper = {"lr": 0.01, "beta1": 0.8, "beta2": 0.99, "eps": 1e-6, "weight_decay": 0.1}
    expected = torch_adam(param, grads, *hyper.values(), decoupled=name == "adamw_step")
    m, v, step = garbage(6), garbage(6), np.array(0)
    for g in grads:
        step += 1
        ref.KERNELS[name](step, g, param, m, v, **hyper)
    np.testing.assert_allclose(param, expected, rtol=1e-12)


def test_add_scalar_counts_steps_and_cast_converts():
    """add_scalar on a 0-d int64 counter; cast rounds to the output dtype."""
    step = np.array(4)
    ref.add_scalar(step, value=1)
    assert step.dtype == np.int64 and step[()] == 5
    x, y = randn(3), garbage(3).astype(np.float32)
    ref.cast(x, y)
    np.testing.assert_array_equal(y, x.astype(np.float32))
