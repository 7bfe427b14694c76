"""The softmax family as rules (nntile_kernels/rules_softmax.py): the NumPy evaluation of
the texts (the reference) and the generated numba loops (cpu_rules_softmax.py) agree
with each other and with float64 SciPy on random tiles, axes and dtypes; slices of
-inf (masked scores), +inf and NaN give what the reference gives; logsumexp's output
is not read when beta == 0; axis 0 (the loops' contiguous-run branch) and axis 1
agree on a tile and its transpose; logsumexp_merge is an elementwise rule;
softmax_backward is two rules of its table."""

import inspect

import numpy as np
import pytest
import scipy.special
from hypothesis import given, settings
from hypothesis import strategies as st

from nntile_kernels import cpu, reference
from nntile_kernels.formulas import ELEMENTWISE, EXP_REDUCTIONS
from nntile_kernels.rules import ArrayRule
from nntile_kernels.rules_softmax import ArrayExpReduction

DTYPES = (np.float16, np.float32, np.float64)
# the loop against the reference (fp16 tiles take the reference), then against SciPy
TOLERANCE = {np.float16: 0.0, np.float32: 2e-6, np.float64: 1e-14}
LOOSE = {np.float16: 3e-3, np.float32: 3e-6, np.float64: 1e-14}


def test_each_op_is_its_rule_in_both_tables():
    for name in EXP_REDUCTIONS:
        assert cpu.KERNELS[name].__module__ == "nntile_kernels.cpu_rules_softmax", name
        assert isinstance(reference.KERNELS[name], ArrayExpReduction), name
    assert cpu.KERNELS["logsumexp_merge"].__module__ == "nntile_kernels.cpu_rules_params"
    assert isinstance(reference.KERNELS["logsumexp_merge"], ArrayRule)
    assert "logsumexp_merge" in ELEMENTWISE


@pytest.mark.parametrize("name, expected", [
    ("softmax", "(x, y, *, axis)"),
    ("logsumexp", "(x, y, *, axis, beta=0.0)"),
    ("maxsumexp", "(x, y, *, axis)"),
    ("logsumexp_merge", "(x, y, z, *, alpha=1.0, beta=1.0)"),
])
def test_signatures_are_the_hand_written_kernels(name, expected):
    assert str(inspect.signature(reference.KERNELS[name])) == expected
    assert str(inspect.signature(cpu.KERNELS[name])) == expected


def _out_shape(name, shape, axis):
    part = shape[:axis] + shape[axis + 1:]
    return {"softmax": shape, "maxsumexp": (2, *part)}.get(name, part)


def _exact(name, x, axis, beta=0.0, old=None):
    """The op in float64 SciPy, written apart from the rules."""
    wide = x.astype(np.float64)
    if name == "softmax":
        return scipy.special.softmax(wide, axis=axis)
    if name == "maxsumexp":
        top = wide.max(axis=axis, keepdims=True)
        return np.stack([top.squeeze(axis), np.exp(wide - top).sum(axis=axis)])
    lse = scipy.special.logsumexp(wide, axis=axis)
    return lse if beta == 0.0 else np.logaddexp(lse, old.astype(np.float64) + np.log(beta))


def _call(table, name, x, out, axis, **beta):
    out = out.copy(order="F")
    table[name](x.copy(order="F"), out, axis=axis, **beta)
    return out


@st.composite
def _cases(draw):
    name = draw(st.sampled_from(sorted(EXP_REDUCTIONS)))
    shape = tuple(draw(st.lists(st.integers(1, 19), min_size=1, max_size=4)))
    axis = draw(st.integers(0, len(shape) - 1))
    beta = draw(st.sampled_from([0.0, 1.0, 0.25])) if name == "logsumexp" else None
    return name, shape, axis, beta, draw(st.sampled_from(DTYPES)), draw(st.integers(0, 99))


@settings(max_examples=150, deadline=None)
@given(case=_cases())
def test_the_loop_computes_what_the_reference_evaluates(case):
    name, shape, axis, beta, dtype, seed = case
    rng = np.random.default_rng(seed)
    x = np.asfortranarray((rng.standard_normal(shape) * 4).astype(dtype))
    old = np.asfortranarray(rng.standard_normal(_out_shape(name, shape, axis)).astype(dtype))
    params = {} if beta is None else {"beta": beta}
    got = _call(cpu.KERNELS, name, x, old, axis, **params)
    expected = _call(reference.KERNELS, name, x, old, axis, **params)
    np.testing.assert_allclose(got, expected, rtol=TOLERANCE[dtype], atol=TOLERANCE[dtype])
    exact = _exact(name, x, axis, beta or 0.0, old)
    np.testing.assert_allclose(got.astype(np.float64), exact, rtol=LOOSE[dtype],
                               atol=LOOSE[dtype])


@pytest.mark.parametrize("table", [cpu.KERNELS, reference.KERNELS], ids=["cpu", "reference"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("axis", [0, 1, 2])
@pytest.mark.parametrize("name", sorted(EXP_REDUCTIONS))
def test_the_output_is_written_not_read(table, name, dtype, axis):
    """The output may be garbage (NaN): logsumexp with beta == 0 and the others
    overwrite it."""
    x = np.asfortranarray((np.arange(60.0).reshape(3, 4, 5) / 8).astype(dtype))
    out = np.full(_out_shape(name, x.shape, axis), np.nan, dtype, order="F")
    table[name](x, out, axis=axis)
    assert not np.isnan(out).any()
    np.testing.assert_allclose(out, _exact(name, x, axis), rtol=LOOSE[dtype])


@pytest.mark.parametrize("table", [cpu.KERNELS, reference.KERNELS], ids=["cpu", "reference"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("axis", [0, 1])
def test_slices_of_minus_inf_plus_inf_and_nan(table, dtype, axis):
    """A slice of all -inf (a fully masked row of scores) has maximum -inf, sum 0 (its
    terms are exp(-inf - 0.0)) and logsumexp -inf, which merges with -inf into -inf,
    never NaN; a +inf entry gives logsumexp +inf; a NaN entry NaN. The loops' axis 0 is
    their contiguous-run branch, axis 1 their running maxima."""
    columns = np.array([[-np.inf] * 11, [-np.inf] * 5 + [1.0] * 6, [0.5] * 10 + [np.inf],
                        [1.0] * 4 + [np.nan] + [2.0] * 6]).T   # 11 x 4: a tail past 8 chains
    x = np.asfortranarray(columns.astype(dtype) if axis == 0 else columns.T.astype(dtype))
    lse = np.empty(4, dtype)
    table["logsumexp"](x, lse, axis=axis)
    np.testing.assert_allclose(lse[:2], [-np.inf, 1.0 + np.log(6.0)], rtol=1e-6)
    assert lse[2] == np.inf and np.isnan(lse[3])
    table["logsumexp"](x, lse, axis=axis, beta=1.0)   # merged with itself
    np.testing.assert_allclose(lse[:2], [-np.inf, 1.0 + np.log(12.0)], rtol=1e-6)
    pair = np.empty((2, 4), dtype, order="F")
    table["maxsumexp"](x, pair, axis=axis)
    np.testing.assert_allclose(pair[:, :2], [[-np.inf, 1.0], [0.0, 6.0]], rtol=1e-6)
    assert pair[0, 2] == np.inf and np.isnan(pair[:, 3]).all()
    unmasked = np.asfortranarray(x[:, 1:2] if axis == 0 else x[1:2])
    probabilities = np.empty_like(unmasked)
    table["softmax"](unmasked, probabilities, axis=axis)
    np.testing.assert_allclose(probabilities.ravel(), [0.0] * 5 + [1 / 6] * 6, rtol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(EXP_REDUCTIONS))
def test_axis_0_and_axis_1_of_the_transpose_agree(name, dtype):
    """The loops' two branches (a contiguous run of axis 0 in 8 chains; m running totals
    along axis 1) compute every term alike (exp in the tile dtype): fp32 results agree
    bitwise (the sums' float64 orders differ only below fp32's last bit); the
    hand-written maxsumexp took fp32 exps on axis 0, float64 ones on axis 1."""
    rng = np.random.default_rng(7)
    x = np.asfortranarray((rng.standard_normal((300, 24)) * 4).astype(dtype))
    xt = np.asfortranarray(x.T)
    along_0 = np.empty(_out_shape(name, x.shape, 0), dtype, order="F")
    along_1 = np.empty(_out_shape(name, xt.shape, 1), dtype, order="F")
    cpu.KERNELS[name](x, along_0, axis=0)
    cpu.KERNELS[name](xt, along_1, axis=1)
    along_1 = along_1.T if name == "softmax" else along_1
    if dtype == np.float32:
        np.testing.assert_array_equal(along_0, along_1)
    else:
        np.testing.assert_allclose(along_0, along_1, rtol=1e-14)


def test_logsumexp_merge_keeps_minus_inf_and_reads_no_y_where_beta_is_zero():
    """Two -inf merge into -inf, +inf wins, NaN stays NaN; beta == 0 leaves y unread
    (NaN there does not leak); alpha and beta weigh exp(x) and exp(y)."""
    x = np.array([-np.inf, 1.0, np.nan, np.inf, -np.inf, 0.5])
    y = np.array([-np.inf, -np.inf, 1.0, 2.0, np.inf, 1.5])
    for table in (cpu.KERNELS, reference.KERNELS):
        z = np.empty(6)
        table["logsumexp_merge"](x, y, z)
        assert z[:5].tolist()[:2] == [-np.inf, 1.0] and np.isnan(z[2])
        assert z[3] == z[4] == np.inf
        np.testing.assert_allclose(z[5], np.logaddexp(0.5, 1.5), rtol=1e-15)
        table["logsumexp_merge"](x, y, z, alpha=0.5, beta=2.0)
        np.testing.assert_allclose(z[5], np.log(0.5 * np.exp(0.5) + 2.0 * np.exp(1.5)),
                                   rtol=1e-15)
        table["logsumexp_merge"](x, np.full(6, np.nan), z, alpha=2.0, beta=0.0)
        np.testing.assert_allclose(z, x + np.log(2.0), rtol=1e-15)


@pytest.mark.parametrize("table", [cpu.KERNELS, reference.KERNELS], ids=["cpu", "reference"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("axis", [0, 1, 2])
def test_softmax_backward_is_sumprod_slice_then_its_broadcast_rule(table, dtype, axis):
    """dx += y * (dy - sum(y * dy)) along the axis, as the table's sumprod_slice then
    softmax_from_logsumexp_backward, bitwise; against float64 NumPy."""
    rng = np.random.default_rng(axis)
    y, dy, dx = (np.asfortranarray(rng.standard_normal((5, 9, 4)).astype(dtype))
                 for _ in range(3))
    got = dx.copy(order="F")
    table["softmax_backward"](y, dy, got, axis=axis)
    d = np.empty(y.shape[:axis] + y.shape[axis + 1:], dtype, order="F")
    table["sumprod_slice"](y, dy, d, axis=axis)
    composed = dx.copy(order="F")
    table["softmax_from_logsumexp_backward"](y, dy, d, composed, axis=axis)
    np.testing.assert_array_equal(got, composed)
    wide = [a.astype(np.float64) for a in (y, dy, dx)]
    exact = wide[2] + wide[0] * (wide[1] - (wide[0] * wide[1]).sum(axis=axis, keepdims=True))
    np.testing.assert_allclose(got, exact, rtol=LOOSE[dtype] * 10, atol=LOOSE[dtype] * 10)
