"""Rules with an operand broadcast along an axis (nntile_kernels/rules_broadcast.py): the
NumPy evaluation of a formula (the reference) and its generated numba loop
(cpu_rules_broadcast.py) agree on random tiles, axes and dtypes; an input a case leaves
unread and an output's old contents never leak; the kernels keep their signatures."""

import inspect

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import BROADCAST_PARAMS, broadcast_arrays, call_on_copies
from nntile_kernels import cpu, reference
from nntile_kernels.formulas import BROADCAST
from nntile_kernels.rules_broadcast import ArrayBroadcast

DTYPES = (np.float16, np.float32, np.float64)
TOLERANCE = {np.float16: 0.0, np.float32: 2e-5, np.float64: 1e-13}  # fp16: the reference


def test_each_op_is_its_rule_in_both_tables():
    for name, broadcast in BROADCAST.items():
        module = "cpu_rules_broadcast" + ("_scalar" if broadcast.shape == "scalar" else "")
        assert cpu.KERNELS[name].__module__ == f"nntile_kernels.{module}", name
        assert isinstance(reference.KERNELS[name], ArrayBroadcast), name


@pytest.mark.parametrize("name, expected", [
    ("add_slice", "(s, x, z, *, axis, alpha=1.0, beta=1.0)"),
    ("multiply_slice", "(s, x, z, *, axis, alpha=1.0)"),
    ("sumprod_slice_backward", "(s, x, dx, *, axis, alpha=1.0)"),
    ("logsumexp_backward", "(x, y, dy, dx, *, axis)"),
    ("softmax_from_logsumexp", "(lse, x, y, *, axis)"),
    ("softmax_from_logsumexp_backward", "(y, dy, d, dx, *, axis)"),
    ("add_fiber", "(x, y, z, *, axis, batch_ndim=0, alpha=1.0, beta=0.0)"),
    ("multiply_fiber", "(f, x, z, *, axis, batch_ndim=0, alpha=1.0)"),
    ("sumprod_fiber_backward", "(f, x, dx, *, axis, batch_ndim=0, alpha=1.0)"),
    ("scale_fiber", "(f, y, *, axis, batch_ndim=0, alpha=1.0)"),
    ("norm_fiber_backward", "(x, y, dy, dx, *, axis, batch_ndim=0, alpha=1.0)"),
    ("scale_slice", "(src, dst, *, alpha, axis)"),
    ("sum_backward", "(dy, x, y, *, alpha=1.0)"),
    ("mse_backward", "(x, y, dloss, dx, *, alpha=1.0)"),
    ("extremum_backward", "(x, y, count, dy, dx, *, axis)"),
    ("norm_slice_backward", "(x, y, dy, dx, *, axis, alpha=1.0)"),
])
def test_signatures_are_the_hand_written_kernels(name, expected):
    """The graph's ops pass these names as keywords: a rule's renaming must keep them."""
    assert str(inspect.signature(reference.KERNELS[name])) == expected
    assert str(inspect.signature(cpu.KERNELS[name])) == expected


def _call(table, name, arrays, axis, batch_ndim, params):
    return call_on_copies(table[name], BROADCAST[name].shape, arrays, axis, batch_ndim, params)


@st.composite
def _cases(draw):
    name = draw(st.sampled_from(sorted(BROADCAST)))
    shape = tuple(draw(st.lists(st.integers(1, 9), min_size=1, max_size=4)))
    axis = draw(st.integers(0, len(shape) - 1))
    batch_ndim = (draw(st.integers(0, len(shape) - 1 - axis))
                  if BROADCAST[name].shape == "fiber" else 0)
    return name, shape, axis, batch_ndim, draw(st.sampled_from(DTYPES)), draw(st.integers(0, 99))


@settings(max_examples=120, deadline=None)
@given(case=_cases())
def test_the_loop_computes_what_the_reference_evaluates(case):
    name, shape, axis, batch_ndim, dtype, seed = case
    arrays = broadcast_arrays(name, shape, axis, batch_ndim, dtype, np.random.default_rng(seed))
    params = BROADCAST_PARAMS.get(name, {})
    got = _call(cpu.KERNELS, name, arrays, axis, batch_ndim, params)
    expected = _call(reference.KERNELS, name, arrays, axis, batch_ndim, params)
    assert not np.isnan(expected).any(), "no NaN of an unread output in the reference"
    tolerance = TOLERANCE[dtype]
    np.testing.assert_allclose(got, expected, rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize("table", [cpu.KERNELS, reference.KERNELS], ids=["cpu", "reference"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("axis", [0, 1, 2])
@pytest.mark.parametrize("name", ["add_slice", "add_fiber"])
def test_add_reads_no_full_input_when_beta_is_zero(table, name, dtype, axis):
    """The full input (the second: add_slice's x, add_fiber's y) may be garbage, or the
    output itself (in place), when beta == 0."""
    shape, broadcast = (3, 4, 5), BROADCAST[name]
    part = (shape[:axis] + shape[axis + 1:]) if broadcast.shape == "slice" else shape[axis:axis + 1]
    dims = (axis,) if broadcast.shape == "slice" else tuple(d for d in range(3) if d != axis)
    partner = np.array(np.arange(np.prod(part)).reshape(part), dtype, order="F")
    garbage = np.full(shape, np.nan, dtype, order="F")
    out = np.full(shape, np.nan, dtype, order="F")
    keywords = dict(axis=axis, alpha=2.0, beta=0.0)
    table[name](partner, garbage, out, **keywords)
    np.testing.assert_array_equal(out, 2 * np.expand_dims(partner, dims) + np.zeros(shape, dtype))
    table[name](partner, out, out, **dict(keywords, alpha=1.0))   # in place
    np.testing.assert_array_equal(out, np.expand_dims(partner, dims) + np.zeros(shape, dtype))


@pytest.mark.parametrize("table", [cpu.KERNELS, reference.KERNELS], ids=["cpu", "reference"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("axis", [0, 1])
def test_logsumexp_backward_of_a_slice_of_all_minus_inf_is_zero(table, dtype, axis):
    """A fully masked row (every score -inf) has logsumexp -inf: exp(x - y) would be nan,
    the rule's shift gives 0 there and exp(x - y) elsewhere."""
    x = np.array([[-np.inf, 0.0], [-np.inf, np.log(3.0)]], dtype, order="F")
    x = x if axis == 0 else np.asfortranarray(x.T)
    y = np.array([-np.inf, np.log(4.0)], dtype)   # the logsumexp of each slice
    dy = np.array([5.0, 8.0], dtype)
    dx = np.ones_like(x, order="F")
    table["logsumexp_backward"](x, y, dy, dx, axis=axis)
    expected = np.array([[1.0, 1.0 + 8.0 / 4.0], [1.0, 1.0 + 8.0 * 3.0 / 4.0]], dtype)
    np.testing.assert_allclose(dx, expected if axis == 0 else expected.T, rtol=1e-6)


@pytest.mark.parametrize("table", [cpu.KERNELS, reference.KERNELS], ids=["cpu", "reference"])
@pytest.mark.parametrize("axis", [0, 1])
def test_norm_fiber_backward_adds_nothing_where_the_norm_is_zero(table, axis):
    x = np.array([[0.0, 3.0], [0.0, 4.0]], order="F")
    x = x.T.copy(order="F") if axis == 0 else x   # the fiber of x that is 0 has y == 0
    y, dy = np.array([0.0, 5.0]), np.array([7.0, 10.0])
    dx = np.full_like(x, 1.0, order="F")
    table["norm_fiber_backward"](x, y, dy, dx, axis=axis, alpha=1.0)
    expected = np.array([[1.0, 1.0 + 10.0 * 3.0 / 5.0], [1.0, 1.0 + 10.0 * 4.0 / 5.0]])
    np.testing.assert_allclose(dx, expected.T if axis == 0 else expected, rtol=1e-15)


@pytest.mark.parametrize("table", [cpu.KERNELS, reference.KERNELS], ids=["cpu", "reference"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("axis", [0, 1])
def test_extremum_backward_splits_dy_among_ties(table, dtype, axis):
    """The entries equal to their slice's maximum share its dy (2 ties: half each), the
    others get nothing, even where the count is 0 and dy / count is inf."""
    x = np.array([[5.0, 1.0, 5.0], [2.0, 9.0, 3.0]], dtype)   # slices along axis 1
    y, count = np.array([5.0, 9.0], dtype), np.array([2.0, 0.0], dtype)
    dy = np.array([3.0, 4.0], dtype)
    x = np.asfortranarray(x.T if axis == 0 else x)
    dx = np.full_like(x, 1.0, order="F")
    with np.errstate(divide="ignore"):   # the reference's dy / count, as NumPy's loop's
        table["extremum_backward"](x, y, count, dy, dx, axis=axis)
    expected = np.array([[2.5, 1.0, 2.5], [1.0, np.inf, 1.0]])
    np.testing.assert_array_equal(dx, expected.T if axis == 0 else expected)
