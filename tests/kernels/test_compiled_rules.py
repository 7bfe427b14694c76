"""The dispatch of the rules cuda.py compiles (nntile_kernels/compiled_rules.py), on the CPU.

A stand-in compiler turns each rule into its NumPy array-expression kernel and records
the dtypes it runs on, so what the GPU table does with each dtype shows here: fp32 and
fp64 tiles run their own kernel, bf16 and fp16 tiles the fp32 kernel on fp32 copies,
rounded on store (CuPy's fp16 array expressions failed with KeyError). The optimizer
updates run their own kernel on fp32 and fp64 tiles, the array expressions otherwise.
"""

import pickle

import ml_dtypes
import numpy as np
import pytest
import scipy.special
from helpers import LOOPED_RULES, RULE_PARAMS, UPDATE_PARAMS

from nntile_kernels import reference
from nntile_kernels.compiled_rules import AWAITING_GPU_CHECK, CompiledRule, CompiledUpdate
from nntile_kernels.layout import c_order_views
from nntile_kernels.formulas import BROADCAST, ELEMENTWISE, FROM_LSE, INDEXED, LOSSES, UPDATES
from nntile_kernels.rules import ArrayRule, ArrayUpdate, rule_namespace

BF16 = np.dtype(ml_dtypes.bfloat16)
NAMESPACE = rule_namespace(np, scipy.special)


class RecordingCompiler:
    """rule, dtype -> a NumPy kernel that records the dtypes of the arrays it gets."""

    def __init__(self):
        self.calls, self.layouts = [], []

    def __call__(self, rule, dtype):
        kernel = ArrayRule(f"compiled_{dtype}", rule, NAMESPACE)

        def run(*args):     # CuPy's order: the inputs, the params, the output
            inputs, values, out = args[:len(rule.inputs)], args[len(rule.inputs):-1], args[-1]
            arrays = (*inputs, out)
            self.calls.append((dtype, {array.dtype.name for array in arrays}))
            self.layouts.append([array.flags.c_contiguous for array in arrays])
            kernel(*arrays, **dict(zip(rule.params, values)))
        return run


def compiled(name):
    compiler = RecordingCompiler()
    fallback_calls = []
    rule = CompiledRule(name, ELEMENTWISE[name], lambda *a: fallback_calls.append(a),
                        compiler, np)
    return rule, compiler.calls, fallback_calls


def rule_arrays(name, dtype, shape=(7, 5), seed=0):
    rng = np.random.default_rng(seed)
    rule = ELEMENTWISE[name]
    low = 0.5 if name.startswith("sqrt") else -2.0
    arrays = [rng.uniform(low, 2.0, shape) for _ in rule.inputs]
    out = rng.standard_normal(shape) if rule.accumulate else np.full(shape, np.nan)
    return [np.asfortranarray(a).astype(dtype) for a in (*arrays, out)]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_fp32_and_fp64_run_their_own_kernel(dtype):
    rule, calls, _ = compiled("gelu")
    rule(*rule_arrays("gelu", dtype))
    assert calls == [(dtype, {dtype})]


@pytest.mark.parametrize("dtype", [np.dtype(np.float16), BF16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("name", LOOPED_RULES)
def test_16_bit_tiles_run_the_fp32_kernel_rounded_on_store(name, dtype):
    """Strided views and in-place calls too (the output is the last input)."""
    rule, calls, fallback = compiled(name)
    params = RULE_PARAMS.get(name, {})
    arrays = [a[::2, 1:] for a in rule_arrays(name, dtype, shape=(9, 6))]
    expected = [a.astype(np.float32) for a in arrays]
    reference.KERNELS[name](*expected, **params)
    rule(*arrays, **params)
    assert calls == [("float32", {"float32"})] and not fallback
    assert arrays[-1].dtype == dtype
    np.testing.assert_array_equal(arrays[-1], expected[-1].astype(dtype))
    inputs = rule_arrays(name, dtype, seed=1)[:-1]
    expected = [a.astype(np.float32) for a in inputs]
    if not inputs:                              # add_scalar: its output is its only tile
        return
    if ELEMENTWISE[name].accumulate:            # dx += f(x) * dy with dx the very dy
        reference.KERNELS[name](*expected, expected[-1], **params)
        rule(*inputs, inputs[-1], **params)
    else:                                       # y = f(x, ...) with y the very x
        reference.KERNELS[name](*expected, expected[0], **params)
        rule(*inputs, inputs[0], **params)
    np.testing.assert_array_equal(inputs[-1], expected[-1].astype(dtype))


def test_fortran_tiles_reach_the_kernel_as_c_ordered_transposes():
    """CuPy walks an elementwise kernel's index space in C order: the Fortran-ordered tiles
    go in transposed (the same memory), strided views and 1-d tiles as they are."""
    compiler = RecordingCompiler()
    rule = CompiledRule("gelu", ELEMENTWISE["gelu"], None, compiler, np)
    for arrays, c_ordered in (
            (rule_arrays("gelu", "float64", shape=(7, 5, 3)), [True, True]),
            ([a[::2] for a in rule_arrays("gelu", "float64", shape=(8, 5))], [False, False]),
            (rule_arrays("gelu", "float64", shape=(6,)), [True, True])):
        expected = [a.copy(order="F") for a in arrays]
        reference.KERNELS["gelu"](*expected)
        rule(*arrays)
        assert compiler.layouts.pop() == c_ordered
        np.testing.assert_array_equal(arrays[-1], expected[-1])


def test_c_order_views_keep_broadcasting_or_leave_the_arrays():
    tile = np.asfortranarray(np.ones((4, 3)))
    row, scalar, vector = tile[:1], np.array(2.0), np.ones(3)
    assert [a.shape for a in c_order_views((row, scalar, tile))] == [(3, 1), (), (3, 4)]
    arrays = (vector, tile)                     # a 1-d operand: trailing alignment differs
    assert c_order_views(arrays) is arrays


def test_mixed_dtypes_take_the_fallback():
    rule, calls, fallback = compiled("relu_backward")
    x, dy, dx = rule_arrays("relu_backward", "float32")
    rule(x, dy.astype(np.float64), dx)
    assert not calls and len(fallback) == 1


class UpdateCompiler:
    """update, dtype -> a NumPy kernel taking CuPy's argument order; records the dtypes."""

    def __init__(self):
        self.calls = []

    def __call__(self, update, dtype):
        kernel = ArrayUpdate(f"compiled_{dtype}", update, NAMESPACE)

        def run(*args):     # the inputs, the counter, the params, then the state
            inputs = len(update.inputs)
            values = args[inputs + 1:inputs + 1 + len(update.params)]
            state = args[inputs + 1 + len(update.params):]
            self.calls.append(dtype)
            kernel(args[inputs], *args[:inputs], *state, **dict(zip(update.params, values)))
        return run


@pytest.mark.parametrize("name", sorted(UPDATES))
def test_an_update_runs_its_own_kernel_on_fp32_and_fp64_only(name):
    compiler, fallback = UpdateCompiler(), []
    update = CompiledUpdate(name, UPDATES[name], lambda *a, **p: fallback.append(a), compiler)
    rng = np.random.default_rng(2)
    count = len(UPDATES[name].inputs) + len(UPDATES[name].state)
    params = UPDATE_PARAMS[name][0]
    for dtype in ("float32", "float64"):
        arrays = [np.asfortranarray(rng.uniform(0.1, 1.0, (5, 3)).astype(dtype))
                  for _ in range(count)]
        expected = [a.copy(order="F") for a in arrays]
        reference.KERNELS[name](np.array(3), *expected, **params)
        update(np.array(3), *arrays, **params)
        for got, want in zip(arrays, expected):
            np.testing.assert_array_equal(got, want)
    assert compiler.calls == ["float32", "float64"] and not fallback
    half = [np.ones((5, 3), np.float16) for _ in range(count)]
    update(np.array(3), *half, lr=0.01)
    update(np.array(3.0), *[a.astype(np.float32) for a in half], lr=0.01)   # a float counter
    assert len(fallback) == 2 and compiler.calls == ["float32", "float64"]


def test_a_formula_lets_c_code_import():
    """C code called from a formula (CuPy compiling a ufunc for a new dtype) imports
    through the formula's builtins; pickle.loads imports the same way (PyImport_Import)."""
    scope = {"loads": pickle.loads, "data": pickle.dumps(np.float16)}
    assert eval("loads(data)", NAMESPACE, scope) is np.float16


def test_a_kernel_held_back_is_compiled_but_its_entry_takes_the_fallback():
    """dispatch=False (cuda.py's AWAITING_GPU_CHECK): the kernel exists for the GPU tests,
    the table entry runs the array expressions."""
    compiler, fallback = RecordingCompiler(), []
    rule = CompiledRule("pow", ELEMENTWISE["pow"], lambda *a, **p: fallback.append(a),
                        compiler, np, dispatch=False)
    assert set(rule.compiled) == {"float32", "float64"}
    rule(*rule_arrays("pow", "float32"), **RULE_PARAMS["pow"])
    assert not compiler.calls and len(fallback) == 1
    updates, held = UpdateCompiler(), []
    update = CompiledUpdate("sgd_step", UPDATES["sgd_step"], lambda *a, **p: held.append(a),
                            updates, dispatch=False)
    tiles = [np.ones((5, 3), np.float32) for _ in range(3)]
    update(np.array(1), *tiles, **UPDATE_PARAMS["sgd_step"][0])
    assert not updates.calls and len(held) == 1


def test_kernels_awaiting_a_gpu_check_are_compiled_rules():
    """Rules, updates, broadcast, indexed or loss rules (the entries cuda.py compiles)."""
    assert AWAITING_GPU_CHECK <= (set(ELEMENTWISE) | set(UPDATES) | set(BROADCAST)
                                  | set(INDEXED) | set(LOSSES) | set(FROM_LSE))
