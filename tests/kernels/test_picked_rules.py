"""Rules that pick one element per column (nntile_kernels/rules_picked.py: the loss of a
class tile): the NumPy evaluation of the formula (the reference) and its generated numba
loop (cpu_rules_picked.py) agree, over every class tile and with ignored labels; a
label outside the classes raises on class tile 0 only; cross_entropy is a logsumexp
then such a rule (PICKED_FROM_LSE)."""

import inspect

import numpy as np
import pytest

from nntile_kernels import cpu, reference
from nntile_kernels.formulas import PICKED, PICKED_FROM_LSE
from nntile_kernels.rules_indexed import AfterLogsumexp
from nntile_kernels.rules_picked import ArrayPicked


def _arrays(dtype, rng, classes=15, columns=(4, 3)):
    """Logits over all the classes, their lse, labels (a third ignored), the kept count."""
    logits = np.asfortranarray(rng.standard_normal((classes, *columns)).astype(dtype))
    lse = np.asfortranarray(np.log(np.exp(logits.astype(np.float64)).sum(axis=0)).astype(dtype))
    labels = np.asfortranarray(rng.integers(0, classes, columns))
    labels[rng.random(columns) < 0.3] = -100
    return logits, lse, labels, np.array(np.count_nonzero(labels != -100), dtype)


def test_each_picked_rule_is_its_rule_in_both_tables():
    expected = ("(logits, lse, labels, count, loss, *, class_offset=0, ignore_index=-100, "
                "num_classes, beta=0.0)")
    for name in PICKED:
        assert cpu.KERNELS[name].__module__ == "nntile_kernels.cpu_rules_picked", name
        assert isinstance(reference.KERNELS[name], ArrayPicked), name
        for table in (cpu.KERNELS, reference.KERNELS):
            assert str(inspect.signature(table[name])) == expected


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("table", [cpu.KERNELS, reference.KERNELS], ids=["cpu", "reference"])
def test_class_tiles_sum_to_the_mean_over_kept_labels(table, dtype):
    """Three class tiles of 5, each with beta = 1 onto the last: the mean of lse -
    logits[label] over the labels kept, in float64 (the loop sums columns in order, the
    reference pairwise: not bitwise)."""
    logits, lse, labels, count = _arrays(dtype, np.random.default_rng(4))
    loss = np.array(0.0, dtype)
    for offset in (0, 5, 10):
        table["cross_entropy_lse"](np.asfortranarray(logits[offset:offset + 5]), lse, labels,
                                   count, loss, num_classes=15, class_offset=offset,
                                   beta=float(offset > 0))
    kept = labels != -100
    wide = logits.astype(np.float64)
    picked = np.take_along_axis(wide, np.where(kept, labels, 0)[None], axis=0)[0]
    expected = (lse.astype(np.float64) - picked)[kept].sum() / count.astype(np.float64)
    tolerance = {np.float16: 1e-3, np.float32: 1e-6, np.float64: 1e-13}[dtype]
    np.testing.assert_allclose(loss, expected, rtol=tolerance)


@pytest.mark.parametrize("table", [cpu.KERNELS, reference.KERNELS], ids=["cpu", "reference"])
def test_every_label_ignored_gives_nan_and_class_tile_0_checks(table):
    logits, lse, labels, count = _arrays(np.float64, np.random.default_rng(5))
    loss = np.array(1.0)
    table["cross_entropy_lse"](logits, lse, np.full_like(labels, -100), np.array(0.0), loss,
                               num_classes=15)
    assert np.isnan(loss)
    labels[2, 1] = 15
    with pytest.raises(IndexError, match="^cross_entropy_lse: labels hold 15, outside"):
        table["cross_entropy_lse"](logits, lse, labels, count, loss, num_classes=15)
    table["cross_entropy_lse"](np.asfortranarray(logits[5:]), lse, labels, count, loss,
                               num_classes=15, class_offset=5)   # not tile 0: no check
    assert np.isfinite(loss)


def test_cross_entropy_is_a_logsumexp_then_its_picked_rule():
    for name in PICKED_FROM_LSE:
        for table in (cpu.KERNELS, reference.KERNELS):
            assert isinstance(table[name], AfterLogsumexp), name
            assert str(inspect.signature(table[name])) == (
                "(logits, labels, loss, *, alpha=1.0, beta=0.0)")
        assert cpu.KERNELS[name].step.__module__ == "nntile_kernels.cpu_rules_picked"
        assert isinstance(reference.KERNELS[name].step, ArrayPicked)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_cross_entropy_step_is_the_reference_and_checks_every_label(dtype):
    """Given one lse, alpha * sum(lse - logits[label]) + beta * loss (summed in another
    order: not bitwise); a label outside the classes raises naming the kernel."""
    logits, lse, labels, _ = _arrays(dtype, np.random.default_rng(6))
    labels = np.asfortranarray(np.abs(labels) % 15)
    results = []
    for table in (cpu.KERNELS, reference.KERNELS):
        loss = np.array(2.0, dtype)
        table["cross_entropy"].step(logits, lse, labels, loss, num_classes=15, alpha=0.5,
                                    beta=0.25)
        results.append(loss)
        bad = labels.copy(order="F")
        bad[0, 1] = -1
        with pytest.raises(IndexError, match="^cross_entropy: labels hold -1, outside"):
            table["cross_entropy"](logits, bad, loss)
    tolerance = {np.float16: 1e-3, np.float32: 1e-6, np.float64: 1e-13}[dtype]
    np.testing.assert_allclose(*results, rtol=tolerance)
