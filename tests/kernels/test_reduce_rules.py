"""Reductions along an axis or of a whole tile (nntile_kernels/rules_reduce.py): the
NumPy evaluation of a term and its sum (the reference) and the generated numba loop
(cpu_rules_reduce.py) agree on random tiles, axes and dtypes; an output's old contents
are not read when beta == 0; the m == 1 run sums and a whole tile's are the 8-chain
grouping; the kernels keep their signatures; the norms and mse square in float64."""

import inspect

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import call_on_copies
from nntile_kernels import cpu, reference
from nntile_kernels.formulas import REDUCTIONS
from nntile_kernels.rules_reduce import ArrayReduction, Reduction

DTYPES = (np.float16, np.float32, np.float64)
TOLERANCE = {np.float16: 0.0, np.float32: 1e-5, np.float64: 1e-13}  # fp16: the reference


def test_each_op_is_its_rule_in_both_tables():
    for name in REDUCTIONS:
        assert cpu.KERNELS[name].__module__ == "nntile_kernels.cpu_rules_reduce", name
        assert isinstance(reference.KERNELS[name], ArrayReduction), name


@pytest.mark.parametrize("name, expected", [
    ("sum_slice", "(x, s, *, axis, alpha=1.0, beta=0.0)"),
    ("sumprod_slice", "(x, y, z, *, axis, alpha=1.0, beta=0.0)"),
    ("sum_fiber", "(x, y, *, axis, batch_ndim=0, alpha=1.0, beta=0.0)"),
    ("sumprod_fiber", "(x, y, f, *, axis, batch_ndim=0, alpha=1.0, beta=0.0)"),
    ("max_slice", "(x, y, *, axis, beta=0.0)"),
    ("min_slice", "(x, y, *, axis, beta=0.0)"),
    ("norm_slice", "(x, y, *, axis, alpha=1.0, beta=0.0)"),
    ("norm_fiber", "(x, y, *, axis, batch_ndim=0, alpha=1.0, beta=0.0)"),
    ("extremum_count", "(x, y, count, *, axis, beta=0.0)"),
    ("sum", "(x, y, *, alpha=1.0, beta=0.0)"),
    ("mse", "(x, y, loss, *, alpha=1.0, beta=0.0)"),
    ("valid_count", "(labels, count, *, ignore_index=-100, beta=0.0)"),
])
def test_signatures_are_the_hand_written_kernels(name, expected):
    assert str(inspect.signature(reference.KERNELS[name])) == expected
    assert str(inspect.signature(cpu.KERNELS[name])) == expected


def _exact(name, arrays, axis, batch_ndim, alpha, beta):
    """The reduction in float64 NumPy, written apart from the rule (sums of x or x * y,
    extrema of x, 2-norms of x, counts of x == y; of a whole tile: sums of x, of
    (x - y)^2, counts of labels != -100)."""
    wide = [array.astype(np.float64) for array in arrays[:-1]]
    if name in ("extremum_count", "valid_count"):
        if name == "valid_count":
            hits = (arrays[0] != -100).sum()
        else:
            along = [1 if d == axis else size for d, size in enumerate(wide[0].shape)]
            hits = (wide[0] == wide[1].reshape(along, order="F")).sum(axis=axis)
        return hits + (beta * arrays[-1].astype(np.float64) if beta else 0.0)
    term = {1: lambda x: x, 2: lambda x, y: x * y}[len(wide)](*wide)
    if name == "mse":
        term = (wide[0] - wide[1]) ** 2
    reduction = REDUCTIONS[name]
    dims = {"slice": (axis,), "whole": tuple(range(term.ndim)),
            "fiber": tuple(d for d in range(term.ndim - batch_ndim) if d != axis)}[
        reduction.shape]
    previous = arrays[-1].astype(np.float64)
    if name.startswith("norm_"):
        norm = abs(alpha) * np.sqrt((term * term).sum(axis=dims))
        return norm if beta == 0.0 else np.hypot(norm, beta * previous)
    if reduction.combine == "maximum":
        total = term.max(axis=dims)
        return total if beta == 0.0 else np.maximum(total, beta * previous)
    if reduction.combine == "minimum":
        total = term.min(axis=dims)
        return total if beta == 0.0 else np.minimum(total, beta * previous)
    return alpha * term.sum(axis=dims) + (beta * previous if beta else 0.0)


def _params(name, alpha, beta):
    return {"alpha": alpha, "beta": beta} if REDUCTIONS[name].takes_alpha else {"beta": beta}


def _out_shape(name, shape, axis, batch_ndim):
    if REDUCTIONS[name].shape == "whole":
        return ()
    if REDUCTIONS[name].shape == "slice":
        return shape[:axis] + shape[axis + 1:]
    return (shape[axis], *shape[len(shape) - batch_ndim:])


def _arrays(name, shape, axis, batch_ndim, dtype, rng):
    """The inputs (normal, F-ordered) and the output (normal: read when beta != 0);
    extremum_count's x in whole numbers (ties) and y its maximum along the axis;
    valid_count's labels int64, about a quarter of them the ignored -100."""
    reduction = REDUCTIONS[name]
    arrays = [np.asfortranarray(rng.standard_normal(shape).astype(dtype))
              for _ in reduction.inputs]
    if reduction.partners:
        arrays = _with_maximum(np.round(arrays[0] * 2), axis)
    if name == "valid_count":
        arrays = [np.asfortranarray(np.where(rng.random(shape) < 0.25, -100,
                                             rng.integers(0, 9, shape)))]
    out = rng.standard_normal(_out_shape(name, shape, axis, batch_ndim)).astype(dtype)
    return [*arrays, np.array(out, order="F")]   # np.array keeps a 0-d output 0-d


def _with_maximum(x, axis):
    """x and its maximum along `axis`: extremum_count's tile and partner."""
    return [np.asfortranarray(x), np.asfortranarray(x.max(axis=axis))]


def _call(table, name, arrays, axis, batch_ndim, params):
    return call_on_copies(table[name], REDUCTIONS[name].shape, arrays, axis, batch_ndim, params)


@st.composite
def _cases(draw):
    name = draw(st.sampled_from(sorted(REDUCTIONS)))
    shape = tuple(draw(st.lists(st.integers(1, 19), min_size=1, max_size=4)))
    axis = draw(st.integers(0, len(shape) - 1))
    batch_ndim = (draw(st.integers(0, len(shape) - 1 - axis))
                  if REDUCTIONS[name].shape == "fiber" else 0)
    params = _params(name, draw(st.sampled_from([1.0, -0.5])),
                     draw(st.sampled_from([0.0, 1.0, 0.25])))
    # an fp16 count of more than 65504 labels is inf (test_valid_count_... has fp16 counts)
    dtypes = DTYPES[1:] if name == "valid_count" else DTYPES
    return (name, shape, axis, batch_ndim, draw(st.sampled_from(dtypes)), params,
            draw(st.integers(0, 99)))


@settings(max_examples=120, deadline=None)
@given(case=_cases())
def test_the_loop_computes_what_the_reference_evaluates(case):
    name, shape, axis, batch_ndim, dtype, params, seed = case
    arrays = _arrays(name, shape, axis, batch_ndim, dtype, np.random.default_rng(seed))
    got = _call(cpu.KERNELS, name, arrays, axis, batch_ndim, params)
    expected = _call(reference.KERNELS, name, arrays, axis, batch_ndim, params)
    tolerance = TOLERANCE[dtype]
    np.testing.assert_allclose(got, expected, rtol=tolerance, atol=tolerance)
    exact = _exact(name, arrays, axis, batch_ndim, params.get("alpha", 1.0), params["beta"])
    loose = {np.float16: 2e-2, np.float32: 1e-4, np.float64: 1e-12}[dtype]
    np.testing.assert_allclose(got.astype(np.float64), exact, rtol=loose, atol=loose)


@pytest.mark.parametrize("table", [cpu.KERNELS, reference.KERNELS], ids=["cpu", "reference"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("axis", [0, 1, 2])
@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_beta_zero_reads_no_output(table, name, dtype, axis):
    """The output may be garbage (NaN) when beta == 0: it is overwritten, not scaled."""
    shape = (3, 4, 5)
    arrays = [np.asfortranarray(np.arange(60.0).reshape(shape).astype(dtype) / 8)
              for _ in REDUCTIONS[name].inputs]
    if REDUCTIONS[name].partners:
        arrays = _with_maximum(np.arange(60.0).reshape(shape).astype(dtype) % 7, axis)
    if name == "valid_count":
        arrays = [np.asfortranarray(np.arange(60).reshape(shape) % 7 - 100)]
    if name == "mse":
        arrays[1] = np.asfortranarray(arrays[1] * 0.5)
    out = np.full(_out_shape(name, shape, axis, 0), np.nan, dtype, order="F")
    table[name](*arrays, out, **_keywords(name, axis), **_params(name, 2.0, 0.0))
    assert not np.isnan(out).any()
    np.testing.assert_allclose(out, _exact(name, [*arrays, out], axis, 0, 2.0, 0.0),
                               rtol=2e-3 if dtype == np.float16 else 1e-6)


def _keywords(name, axis):
    """axis=axis, but for a whole tile (none)."""
    return {} if REDUCTIONS[name].shape == "whole" else {"axis": axis}


@pytest.mark.parametrize("table", [cpu.KERNELS, reference.KERNELS], ids=["cpu", "reference"])
@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("name", ["max_slice", "min_slice"])
def test_an_extremum_is_nan_where_a_term_is(table, name, axis):
    """NumPy's max and maximum: a NaN in a slice (in the 8-chain body or the tail of a
    run) or in the merged output gives NaN."""
    x = np.asfortranarray(np.arange(43.0 * 3).reshape(43, 3))   # 5 rounds of 8, a tail of 3
    x[0, 0], x[41, 1] = np.nan, np.nan
    x = x if axis == 0 else np.asfortranarray(x.T)
    y = np.array([1.0, 2.0, np.nan])
    table[name](x, y, axis=axis, beta=1.0)
    assert np.isnan(y).tolist() == [True, True, True]
    table[name](x, y, axis=axis)
    assert np.isnan(y).tolist() == [True, True, False]


def _chained_sum(values):
    """The m == 1 run sums' grouping in Python: 8 chains merged pairwise, then the tail."""
    chains = [0.0] * 8
    whole = len(values) // 8 * 8
    for index in range(whole):
        chains[index % 8] += float(values[index])
    total = ((chains[0] + chains[1]) + (chains[2] + chains[3])) + (
        (chains[4] + chains[5]) + (chains[6] + chains[7]))
    for value in values[whole:]:
        total += float(value)
    return total


@pytest.mark.parametrize("length", [5, 8, 37, 300])
def test_an_axis_0_slice_sums_its_run_in_8_chains(length):
    """A slice along axis 0 (m == 1: LayerNorm's channels) is one contiguous run per
    output: summed in the fixed 8-chain order of the hand-written loops, bitwise; values
    of mixed magnitudes make another order round differently."""
    rng = np.random.default_rng(length)
    scales = 10.0 ** rng.integers(-8, 8, (length, 3))
    x = np.asfortranarray(rng.standard_normal((length, 3)) * scales)
    s = np.empty(3)
    cpu.KERNELS["sum_slice"](x, s, axis=0)
    assert [float(v) for v in s] == [_chained_sum(x[:, column]) for column in range(3)]
    cpu.KERNELS["sumprod_slice"](x, x, s, axis=0)
    assert [float(v) for v in s] == [_chained_sum(x[:, column] ** 2) for column in range(3)]


@pytest.mark.parametrize("shape", [(), (5,), (8, 1), (37, 3, 2), (300, 7)])
def test_a_whole_tile_sums_its_run_in_8_chains(shape):
    """sum and mse total a whole tile as one contiguous run in storage order, in the fixed
    8-chain grouping, bitwise (the hand-written loops kept one chain); mse squares x - y
    of fp32 tiles in float64, as the reference does."""
    rng = np.random.default_rng(len(shape))
    x = np.array(rng.standard_normal(shape) * 10.0 ** rng.integers(-8, 8, shape), order="F")
    y = np.array(rng.standard_normal(shape), np.float32, order="F")
    out = np.array(0.0)
    cpu.KERNELS["sum"](x, out, alpha=-0.5)
    assert float(out) == -0.5 * _chained_sum(x.ravel("F"))
    x32 = x.astype(np.float32)
    loss = np.array(0.0, np.float32)
    cpu.KERNELS["mse"](x32, y, loss)
    wide = x32.ravel("F").astype(np.float64) - y.ravel("F")
    assert float(loss) == np.float32(_chained_sum(wide * wide))


@pytest.mark.parametrize("table", [cpu.KERNELS, reference.KERNELS], ids=["cpu", "reference"])
@pytest.mark.parametrize("ignore_index", [-100, 0, 3])
def test_valid_count_counts_the_labels_it_does_not_ignore(table, ignore_index):
    """ignore_index is the term's param, compared as the int it is; a count merges with
    beta * count, and an fp16 count takes the reference."""
    labels = np.asfortranarray(np.arange(-1, 23).reshape(4, 6) % 5)
    labels[0, 0] = -100
    for dtype in (np.float16, np.float32, np.float64):
        count = np.array(0.5, dtype)
        table["valid_count"](labels, count, ignore_index=ignore_index, beta=2.0)
        assert float(count) == 1.0 + np.count_nonzero(labels != ignore_index)


@pytest.mark.parametrize("table", [cpu.KERNELS, reference.KERNELS], ids=["cpu", "reference"])
@pytest.mark.parametrize("name, keywords", [("sum", {"axis": 0}), ("mse", {"batch_ndim": 1}),
                                             ("valid_count", {"alpha": 2.0})])
def test_a_whole_tile_takes_no_axis(table, name, keywords):
    """A whole tile's reduction has no axis, no batch_ndim, and a count no alpha."""
    arrays = [np.ones((3, 4), order="F") for _ in REDUCTIONS[name].inputs]
    with pytest.raises(TypeError):
        table[name](*arrays, np.array(0.0), **keywords)


def test_a_fiber_with_its_axis_0_sums_in_storage_order():
    """A fiber along axis 0 (m == 1: LayerNorm's gamma): each output is a sum over the
    other dims in storage order, one running total per fiber entry."""
    rng = np.random.default_rng(0)
    x = np.asfortranarray(rng.standard_normal((4, 6, 5)) * 10.0 ** rng.integers(-8, 8, (4, 6, 5)))
    f = np.empty(4)
    cpu.KERNELS["sum_fiber"](x, f, axis=0)
    expected = [0.0] * 4
    for flat in x.reshape(4, -1, order="F").T:
        expected = [total + float(value) for total, value in zip(expected, flat)]
    assert [float(v) for v in f] == expected


@pytest.mark.parametrize("table", [cpu.KERNELS, reference.KERNELS], ids=["cpu", "reference"])
@pytest.mark.parametrize("name, keywords", [("max_slice", {"alpha": 2.0}),
                                             ("sum_slice", {"batch_ndim": 1}),
                                             ("sum_fiber", {"gamma": 1.0})])
def test_a_parameter_the_kernel_lacks_is_refused(table, name, keywords):
    """max_slice has no alpha, a slice no batch_ndim: both tables refuse them alike."""
    x, out = np.ones((3, 4), order="F"), np.ones(4)
    with pytest.raises(TypeError):
        table[name](x, out, axis=0, **keywords)


@pytest.mark.parametrize("table", [cpu.KERNELS, reference.KERNELS], ids=["cpu", "reference"])
@pytest.mark.parametrize("name, axis", [("norm_slice", 0), ("norm_slice", 1),
                                        ("norm_fiber", 0), ("norm_fiber", 1)])
def test_a_norm_squares_fp32_in_float64(table, name, axis):
    """A norm widens x before squaring it: fp32 squares of 1e20 overflow (3.4e38 is fp32's
    largest; the hand-written loops and the reference gave inf), float64 ones do not,
    and the norm, 3e20 or so, is an fp32 again."""
    x = np.full((9, 4), 1e20, np.float32, order="F")
    x[::2] *= -1
    length = x.shape[axis] if name == "norm_slice" else x.shape[1 - axis]
    out = np.empty(x.shape[1 - axis] if name == "norm_slice" else x.shape[axis], np.float32)
    table[name](x, out, axis=axis)
    np.testing.assert_allclose(out, np.sqrt(length) * 1e20, rtol=1e-6)
    previous = out.copy()
    table[name](x, out, axis=axis, alpha=-1.0, beta=1.0)   # hypot(norm, norm)
    np.testing.assert_allclose(out, np.sqrt(2.0) * previous, rtol=1e-6)


def test_a_norm_sums_its_squares_in_the_loops_order():
    """norm_slice along axis 0 sums each run's squares in the 8 chains of sum_slice;
    along another axis, and norm_fiber along axis 0, one running float64 total per
    output in storage order (the hand-written loops' order), bitwise."""
    rng = np.random.default_rng(3)
    x = np.asfortranarray(rng.standard_normal((37, 3)) * 10.0 ** rng.integers(-8, 8, (37, 3)))
    y = np.empty(3)
    cpu.KERNELS["norm_slice"](x, y, axis=0, alpha=-2.0)
    assert [float(v) for v in y] == [2.0 * np.sqrt(_chained_sum(x[:, c] ** 2)) for c in range(3)]
    xt = np.asfortranarray(x.T)
    cpu.KERNELS["norm_slice"](xt, y, axis=1, alpha=-2.0)
    expected = [0.0] * 3
    for column in xt.T:
        expected = [total + value * value for total, value in zip(expected, column)]
    assert [float(v) for v in y] == [2.0 * np.sqrt(total) for total in expected]
    cpu.KERNELS["norm_fiber"](xt, y, axis=0, alpha=-2.0)
    assert [float(v) for v in y] == [2.0 * np.sqrt(total) for total in expected]


def test_a_rule_names_nothing_its_store_is_not_given():
    """A finish sees the total and alpha (no alpha for an extremum), a merge the value,
    beta and the old output: anything else is refused where the rule is written."""
    with pytest.raises(AssertionError):
        Reduction(("x",), "y", "x", "slice", finish="alpha * total + beta")
    with pytest.raises(AssertionError):
        Reduction(("x",), "y", "x", "slice", "maximum", finish="alpha * total")
    with pytest.raises(AssertionError):
        Reduction(("x",), "y", "x", "slice", merge="hypot(value, total)")
    assert Reduction(("x",), "y", "x", "slice").merge == "value + beta * y"
