"""Rules that name where an element is (nntile_kernels/rules_indexed.py: the masks and
rope): the NumPy evaluation of a formula (the reference) and its generated numba loop
(cpu_rules_indexed.py) agree bitwise, in place or not, with offsets; every comparison
the loop generator turns into a run split gives what the rule says; and the rules' C++
(rules_cuda_indexed.py), compiled for the host, computes what NumPy does; the losses'
rules (LOSSES, FROM_LSE) likewise against their loops (cpu_rules_loss.py)."""

import inspect

import numba
import numpy as np
import pytest
import scipy.special
from host_cpp import host_library as compile_host_library
from helpers import assert_within_ulps
from host_rules import host_source, indexed_function, indexed_kernel

from nntile_kernels import cpu, cpu_rules_indexed, reference
from nntile_kernels.cpu_common import F16, folded_t
from nntile_kernels.cpu_fastmath import where
from nntile_kernels.formulas import FROM_LSE, INDEXED, LOSSES
from nntile_kernels.generate_cpu_indexed import kernel_source
from nntile_kernels.rules import rule_namespace
from nntile_kernels.rules_cuda import C_TYPES
from nntile_kernels.rules_cuda_indexed import index_sizes
from nntile_kernels.rules_indexed import AfterLogsumexp, ArrayIndexed, Indexed


def _arrays(name, dtype, rng, shape=(6, 4, 3, 2)):
    """A call's arrays and keywords: a mask over the two leading dims, scores with
    offsets, a rope over head_dim 6 with tables over (3, 4)."""
    def tile(*dims):
        return np.asfortranarray(rng.standard_normal(dims).astype(dtype))
    if name == "mask_scalar":
        mask = np.asfortranarray(rng.random(shape[:2]) < 0.5)
        return [mask, tile(*shape), tile(*shape)], dict(val=-np.inf, batch_ndim=2)
    if name == "mask_causal":
        return [tile(*shape), tile(*shape)], dict(val=-2.5, key_offset=3, query_offset=5)
    return [tile(3, 4), tile(3, 4), tile(*shape), tile(*shape)], {}


def test_each_op_is_its_rule_in_both_tables():
    for name in INDEXED:
        assert cpu.KERNELS[name].__module__ == "nntile_kernels.cpu_rules_indexed", name
        assert isinstance(reference.KERNELS[name], ArrayIndexed), name


@pytest.mark.parametrize("name, expected", [
    ("mask_scalar", "(mask, x, y, *, val, batch_ndim=0)"),
    ("mask_causal", "(x, y, *, val, key_offset=0, query_offset=0)"),
    ("rope", "(sin, cos, src, dst)"),
    ("rope_backward", "(sin, cos, dy, dx)"),
])
def test_signatures_are_the_hand_written_kernels(name, expected):
    for table in (cpu.KERNELS, reference.KERNELS):
        assert str(inspect.signature(table[name])) == expected


@pytest.mark.parametrize("in_place", [False, True])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(INDEXED))
def test_loop_is_bitwise_the_reference(name, dtype, in_place):
    """In place, the output is the tile input (the graph's masks are in place); rope in
    place too. fp16 tiles take the reference itself."""
    arrays, keywords = _arrays(name, dtype, np.random.default_rng(3))
    if in_place:
        arrays[-1] = arrays[-2]
    results = []
    for table in (cpu.KERNELS, reference.KERNELS):
        copies = [array.copy(order="F") for array in arrays]
        if in_place:
            copies[-1] = copies[-2]
        table[name](*copies, **keywords)
        results.append(copies[-1])
    np.testing.assert_array_equal(*results)


def test_the_masks_pick_what_they_say():
    x = np.asfortranarray(np.arange(24.0).reshape(4, 3, 2))
    y = np.empty_like(x)
    cpu.KERNELS["mask_causal"](x, y, val=-1.0, key_offset=1, query_offset=2)
    keys, queries = np.meshgrid(np.arange(1, 5), np.arange(2, 5), indexing="ij")
    np.testing.assert_array_equal(y, np.where((keys > queries)[..., None], -1.0, x))
    mask = np.asfortranarray([[True, False, True], [False, True, True],
                              [True, True, False], [False, False, True]])
    cpu.KERNELS["mask_scalar"](mask, x, y, val=7.0, batch_ndim=1)
    np.testing.assert_array_equal(y, np.where(mask[..., None], x, 7.0))


def test_tiles_of_another_layout_take_the_reference():
    """A C-ordered tile would fold to a copy: the loop must not write it."""
    rng = np.random.default_rng(0)
    x = np.ascontiguousarray(rng.standard_normal((5, 4, 3)))
    expected = x.copy()
    reference.KERNELS["mask_causal"](x, expected, val=0.0)
    got = x.copy()
    cpu.KERNELS["mask_causal"](x, got, val=0.0)
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("condition", [
    "key + offset > query", "key + offset >= query", "key + offset < query",
    "key + offset <= query", "key > query + offset", "key <= query + offset",
])
@pytest.mark.parametrize("in_place", [False, True])
def test_generated_run_split_is_the_condition(condition, in_place):
    """Every comparison the generator turns into a run at the head or the tail of a
    column, each side of it, against the NumPy evaluation of the same rule."""
    rule = Indexed(("x",), "y", ("x",), cases=((condition, "val"),),
                   positions=(("key", 0), ("query", 1)), params=("val",), offsets=("offset",))
    def njit(cache, **options):   # source run by exec has no file to cache to
        return numba.njit(**options)
    namespace = {"np": np, "njit": njit, "folded_t": folded_t,
                 "F16": F16, "where": where, "_takes": cpu_rules_indexed._takes,
                 "_same": cpu_rules_indexed._same}
    exec(kernel_source("case", rule), namespace)
    array = ArrayIndexed("case", rule, rule_namespace(np, scipy.special))
    x = np.asfortranarray(np.random.default_rng(1).standard_normal((7, 5, 2)))
    for offset in (-9, -2, 0, 3, 9):
        expected, got = x.copy(order="F"), x.copy(order="F")
        array(x.copy(order="F"), expected, val=-1.0, offset=offset)
        source = got if in_place else x.copy(order="F")
        namespace["case"](source, got, val=-1.0, offset=offset)
        np.testing.assert_array_equal(got, expected, err_msg=f"{condition}, offset {offset}")


# ---------------------------------------------------------------- the C++ on the host


@pytest.fixture(scope="module")
def host_library(tmp_path_factory):
    return compile_host_library(tmp_path_factory.mktemp("indexed_rules"),
                                host_source(INDEXED, indexed_function))


@pytest.mark.parametrize("dtype", sorted(C_TYPES))
@pytest.mark.parametrize("name", sorted(INDEXED))
def test_cpp_of_each_indexed_rule_matches_its_numpy_evaluation(host_library, name, dtype):
    """The masks select, so they are bitwise; rope's products may be contracted into
    fused multiply-adds by the host compiler, hence a tolerance."""
    indexed = INDEXED[name]
    arrays, keywords = _arrays(name, dtype, np.random.default_rng(5))
    expected = arrays[-1].copy(order="F")
    reference.KERNELS[name](*arrays[:-1], expected, **keywords)
    got = arrays[-1].copy(order="F")
    partner = arrays[0]
    sizes = {"n0": arrays[-1].shape[0], "n1": arrays[-1].shape[1], "lead": partner.size}
    # each tile in memory order: a Fortran-ordered tile's transpose, flattened
    indexed_kernel(host_library, name, dtype)(
        *[array.T.reshape(-1) for array in arrays[:-1]],
        *[sizes[size] for size in index_sizes(indexed)],
        *[float(keywords[param]) for param in indexed.params],
        *[keywords[offset] for offset in indexed.offsets],
        got.T.reshape(-1), **({"size": got.size // 2} if indexed.paired else {}))
    if indexed.paired:
        tolerance = 1e-13 if dtype == "float64" else 2e-6
        np.testing.assert_allclose(got, expected, rtol=tolerance, atol=tolerance)
    else:
        np.testing.assert_array_equal(got, expected)


# ---------------------------------------------------------------- the losses' rules


def _loss_arrays(dtype, rng, classes=5, columns=(4, 3)):
    """A class tile of `classes` logits per position, the lse of the whole row, labels over
    3 * classes classes (a third ignored), count, dloss and dlogits."""
    logits = np.asfortranarray(rng.standard_normal((classes, *columns)).astype(dtype))
    lse = np.asfortranarray((np.log(np.exp(logits).sum(axis=0)) + 1.0).astype(dtype))
    labels = np.asfortranarray(rng.integers(0, 3 * classes, columns))
    labels[rng.random(columns) < 0.3] = -100
    count = np.array(np.count_nonzero(labels != -100), dtype)
    dlogits = np.asfortranarray(rng.standard_normal(logits.shape).astype(dtype))
    return [logits, lse, labels, count, np.array(1.5, dtype), dlogits]


def test_each_loss_is_its_rule_in_both_tables():
    for name in LOSSES:
        assert cpu.KERNELS[name].__module__ == "nntile_kernels.cpu_rules_loss", name
        assert isinstance(reference.KERNELS[name], ArrayIndexed), name
    expected = ("(logits, lse, labels, count, dloss, dlogits, *, class_offset=0, "
                "ignore_index=-100, num_classes)")
    for table in (cpu.KERNELS, reference.KERNELS):
        assert str(inspect.signature(table["cross_entropy_lse_backward"])) == expected


@pytest.mark.parametrize("class_offset", [0, 5, 10])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_loss_loop_is_the_reference(dtype, class_offset):
    """fp64 to a few ulps of 1 (the softmax's scale; NumPy's SIMD exp differs from
    libm's in the last bit on some CPUs); fp32 within the fast exp's error
    (cpu_fastmath); fp16 is the reference itself. Each class tile of the 15 classes
    holds some labels."""
    arrays = _loss_arrays(dtype, np.random.default_rng(7))
    results = []
    for table in (cpu.KERNELS, reference.KERNELS):
        copies = [array.copy(order="F") for array in arrays]
        table["cross_entropy_lse_backward"](*copies, num_classes=15, class_offset=class_offset)
        results.append(copies[-1])
    if dtype == np.float32:
        np.testing.assert_allclose(*results, rtol=1e-6, atol=1e-7)
    elif dtype == np.float64:
        assert_within_ulps(*results, ulps=4, scale=np.abs(results[1]) + 1.0)
    else:
        np.testing.assert_array_equal(*results)


@pytest.mark.parametrize("table", [cpu.KERNELS, reference.KERNELS], ids=["cpu", "reference"])
def test_loss_is_softmax_minus_onehot_and_ignored_columns_add_nothing(table):
    """Against the formula written out; an ignored column's logits are inf and its lse
    nan, and it adds nothing; a count of 0 (every label ignored) adds nothing either."""
    logits = np.asfortranarray([[0.0, np.inf, 1.0], [1.0, np.inf, 2.0]])
    lse = np.array([np.logaddexp(0.0, 1.0), np.nan, np.logaddexp(1.0, 2.0)])
    labels = np.array([1, -1, 2])
    dlogits = np.zeros_like(logits)
    table["cross_entropy_lse_backward"](logits, lse, labels, np.array(2.0), np.array(3.0),
                                        dlogits, ignore_index=-1, num_classes=4, class_offset=1)
    softmax = np.exp(logits - lse)
    onehot = np.array([[True, False, False], [False, False, True]])
    expected = np.where([True, False, True], 1.5 * (softmax - onehot), 0.0)
    np.testing.assert_allclose(dlogits, expected, rtol=1e-15)
    table["cross_entropy_lse_backward"](logits, lse, np.full(3, -1), np.array(0.0),
                                        np.array(3.0), dlogits, ignore_index=-1, num_classes=4)
    np.testing.assert_allclose(dlogits, expected, rtol=1e-15)


def test_cross_entropy_backward_is_a_logsumexp_then_its_rule():
    """Each table's entry runs its own logsumexp, then the FROM_LSE rule's entry: the
    generated loop on the cpu, the NumPy evaluation in the reference."""
    for name in FROM_LSE:
        for table in (cpu.KERNELS, reference.KERNELS):
            assert isinstance(table[name], AfterLogsumexp), name
            assert str(inspect.signature(table[name])) == (
                "(logits, labels, dloss, dlogits, *, alpha=1.0)")
        assert cpu.KERNELS[name].step.__module__ == "nntile_kernels.cpu_rules_loss"
        assert isinstance(reference.KERNELS[name].step, ArrayIndexed)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_cross_entropy_backward_step_is_the_reference(dtype):
    """Given one lse, the loop is the reference in fp64 to a few ulps of the step's
    scale (NumPy's SIMD exp and libm's may differ in the last bit; fp32: the fast exp);
    a label outside the classes raises naming the kernel, not its step."""
    rng = np.random.default_rng(11)
    logits = np.asfortranarray(rng.standard_normal((6, 4, 3)).astype(dtype))
    lse = np.asfortranarray(np.log(np.exp(logits.astype(np.float64)).sum(axis=0)).astype(dtype))
    labels = np.asfortranarray(rng.integers(0, 6, (4, 3)))
    dlogits = np.asfortranarray(rng.standard_normal(logits.shape).astype(dtype))
    results = []
    for table in (cpu.KERNELS, reference.KERNELS):
        out = dlogits.copy(order="F")
        table["cross_entropy_backward"].step(logits, lse, labels, np.array(2.0, dtype), out,
                                             alpha=0.5, num_classes=6)
        results.append(out)
        bad = labels.copy(order="F")
        bad[1, 2] = 6
        with pytest.raises(IndexError, match="^cross_entropy_backward: labels hold 6, outside"):
            table["cross_entropy_backward"](logits, bad, np.array(2.0, dtype), out)
    if dtype == np.float32:
        np.testing.assert_allclose(*results, rtol=1e-6, atol=1e-7)
    elif dtype == np.float64:
        assert_within_ulps(*results, ulps=4, scale=np.abs(results[1]) + 1.0)
    else:
        np.testing.assert_array_equal(*results)
