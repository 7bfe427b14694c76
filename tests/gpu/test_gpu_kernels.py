"""The cuda table on a GPU: its own parts against the NumPy reference.

Everything here is marked gpu (tests/conftest.py skips it, saying why, without CuPy or
a CUDA device; `pytest -m gpu` selects it). The whole case table of every kernel on
cuda, fp64/fp32/fp16, forward and backward, runs in tests/kernels/test_kernels_table.py
(its `cuda` backend, also gpu-marked); this module checks what only CUDA has: the
ElementwiseKernels that cuda.py compiles from the rules of nntile_kernels/formulas/ (the
elementwise rules and updates, the broadcast and the indexed rules). Importing it needs no
CuPy.
"""

import inspect

import numpy as np
import pytest
from helpers import (BROADCAST_PARAMS, INDEXED_CASES, LOOPED_RULES, LOSS_CASES, RULE_PARAMS,
                     UPDATE_PARAMS, broadcast_arrays, broadcast_cases, broadcast_param_cases,
                     indexed_arrays, kernel_keywords, loss_arrays)

import nntile_kernels
from nntile_kernels import reference
from nntile_kernels.formulas import BROADCAST, ELEMENTWISE, INDEXED, UPDATES

pytestmark = pytest.mark.gpu

# (rtol, atol) of a compiled kernel against the reference in the same dtype: those of
# tests/kernels/test_kernels_table.py (fp32 math functions differ by a few ulp, and
# gelutanh_backward's 1 - t*t cancels)
TOLERANCE = {"float64": (1e-12, 1e-12), "float32": (2e-5, 2e-5), "float16": (2e-2, 2e-2)}


@pytest.fixture(scope="module")
def cuda():
    """(cupy, the cuda KERNELS table)."""
    import cupy

    return cupy, nntile_kernels.get_kernels("cuda")


def rule_inputs(name, rule, dtype, shape=(33, 17), seed=0):
    """Host inputs of a rule (sqrt wants x > 0) and an output holding NaN, or random
    values to accumulate into; all Fortran-ordered."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.5, 2.0, shape) if name.startswith("sqrt") else rng.standard_normal(shape)
    arrays = ([x] + [rng.standard_normal(shape) for _ in rule.inputs[1:]])[:len(rule.inputs)]
    out = rng.standard_normal(shape) if rule.accumulate else np.full(shape, np.nan)
    return [np.asfortranarray(a, dtype=dtype) for a in (*arrays, out)]


def test_cuda_table_has_every_kernel_with_the_reference_signature(cuda):
    _, table = cuda
    assert sorted(table) == list(nntile_kernels.KERNEL_NAMES)
    for name in nntile_kernels.KERNEL_NAMES:
        assert inspect.signature(table[name]) == inspect.signature(reference.KERNELS[name]), name


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", LOOPED_RULES)
def test_compiled_rule_matches_reference(cuda, name, dtype):
    """The ElementwiseKernel of one rule (forward or backward) on a Fortran tile; its
    params go between the inputs and the output (CuPy's order)."""
    cupy, table = cuda
    rule, params = ELEMENTWISE[name], RULE_PARAMS.get(name, {})
    host = rule_inputs(name, rule, dtype)
    device = [cupy.asarray(a, order="F") for a in host]
    table[name].compiled[dtype](*device[:-1], *(params[p] for p in rule.params), device[-1])
    reference.KERNELS[name](*host, **params)
    rtol, atol = TOLERANCE[dtype]
    np.testing.assert_allclose(cupy.asnumpy(device[-1]), host[-1], rtol=rtol, atol=atol)


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16"])
@pytest.mark.parametrize("name", LOOPED_RULES)
def test_table_entry_on_strided_and_aliased_tiles(cuda, name, dtype, monkeypatch):
    """The table entry (its compiled kernel; fp16 through the fp32 one, rounded on store)
    on a strided view, and in place: the output is x for y = f(x, ...), dy for dx +=.
    A kernel held back (AWAITING_GPU_CHECK) is dispatched here, so this run checks it."""
    cupy, table = cuda
    monkeypatch.setattr(table[name], "dispatch", True)
    rule, params = ELEMENTWISE[name], RULE_PARAMS.get(name, {})
    host = rule_inputs(name, rule, dtype, shape=(40, 30))
    views = [a[::2, 1::3] for a in host]
    device = [cupy.asarray(a, order="F")[::2, 1::3] for a in host]
    table[name](*device, **params)
    reference.KERNELS[name](*views, **params)
    rtol, atol = TOLERANCE[dtype]
    np.testing.assert_allclose(cupy.asnumpy(device[-1]), views[-1], rtol=rtol, atol=atol)
    if not rule.inputs:   # add_scalar: its output is its only tile, nothing to alias
        return
    aliased_host = rule_inputs(name, rule, dtype, seed=1)[:-1]
    aliased = [cupy.asarray(a, order="F") for a in aliased_host]
    if rule.accumulate:   # dx += f(x) * dy with dx the very dy array
        expected = aliased_host[-1] + 0
        out = aliased[-1]
    else:                 # y = f(x, ...) with y the very x array (the first input)
        expected = np.full_like(aliased_host[0], np.nan)
        out = aliased[0]
    reference.KERNELS[name](*aliased_host, expected, **params)
    table[name](*aliased, out, **params)
    np.testing.assert_allclose(cupy.asnumpy(out), expected, rtol=rtol, atol=atol)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", sorted(UPDATES))
def test_compiled_update_matches_reference(cuda, name, dtype, monkeypatch):
    """SGD (each tested params: momentum, nesterov, none), Adam and AdamW in one launch on
    Fortran tiles, at step 1 (velocity and moments unread: NaN there) and step 3, held
    back or not (AWAITING_GPU_CHECK)."""
    cupy, table = cuda
    monkeypatch.setattr(table[name], "dispatch", True)
    update = UPDATES[name]
    rng = np.random.default_rng(3)
    for params in UPDATE_PARAMS[name]:
        for step in (1, 3):
            host = [rng.uniform(0.1, 1.0, (33, 17)) for _ in (*update.inputs, *update.state)]
            if step == 1:
                for state in host[len(update.inputs) + 1:]:
                    state[...] = np.nan
            host = [np.asfortranarray(a, dtype=dtype) for a in host]
            device = [cupy.asarray(a, order="F") for a in host]
            table[name](cupy.array(step), *device, **params)
            reference.KERNELS[name](np.array(step), *host, **params)
            rtol, atol = TOLERANCE[dtype]
            for got, want in zip(device, host):
                np.testing.assert_allclose(cupy.asnumpy(got), want, rtol=rtol, atol=atol)


def _no_fallback(*arrays, **keywords):
    raise AssertionError("the compiled kernel did not take these tiles")


def _on_device(cupy, entry, name, tiles, out_is, keywords, expected=None):
    """`entry` on device copies of `tiles` (the output the copy of input `out_is` where
    given: in place) and the reference (`expected`, or the reference table's `name`) on
    host copies (16-bit: in fp32); both outputs."""
    wide = [a.astype(np.float32) if a.dtype == np.float16 else a for a in tiles]
    device = [cupy.asarray(a, order="F") for a in tiles]
    host = [a.copy(order="F") for a in wide]
    if out_is is not None:
        device[-1], host[-1] = device[out_is], host[out_is]
    entry(*device, **keywords)
    (expected or reference.KERNELS[name])(*host, **keywords)
    return cupy.asnumpy(device[-1]).astype(np.float64), host[-1].astype(np.float64)


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16"])
@pytest.mark.parametrize("name, axis, batch_ndim", broadcast_cases((5, 4, 3, 2)))
def test_compiled_broadcast_matches_reference(cuda, name, axis, batch_ndim, dtype,
                                              monkeypatch):
    """The broadcast rule's table entry on its compiled kernel (fp16 through the fp32 one,
    rounded on store), dispatched though held back (AWAITING_GPU_CHECK) and its fallback
    made to fail: Fortran tiles of an uneven shape, each axis, a fiber with and without
    a batch dim, beta == 0 with NaN where unread; then in place of each full input."""
    cupy, table = cuda
    entry, broadcast = table[name], BROADCAST[name]
    monkeypatch.setattr(entry, "dispatch", True)
    monkeypatch.setattr(entry, "fallback", _no_fallback)
    arrays = broadcast_arrays(name, (5, 4, 3, 2), axis, batch_ndim, np.dtype(dtype),
                              np.random.default_rng(axis))
    rtol, atol = TOLERANCE[dtype]
    for params, tiles in broadcast_param_cases(name, arrays):
        keywords = kernel_keywords(broadcast.shape, axis, batch_ndim, params)
        got, expected = _on_device(cupy, entry, name, tiles, None, keywords)
        np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol, err_msg=str(params))
    keywords = kernel_keywords(broadcast.shape, axis, batch_ndim, BROADCAST_PARAMS.get(name, {}))
    for position, input_name in enumerate(broadcast.rule.inputs):
        if input_name not in broadcast.partners:
            got, expected = _on_device(cupy, entry, name, arrays, position, keywords)
            np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol,
                                       err_msg=f"in place of {input_name}")


@pytest.mark.parametrize("in_place", [False, True], ids=["", "in_place"])
@pytest.mark.parametrize("dtype", ["float64", "float32", "float16"])
@pytest.mark.parametrize("name, shape, lead, keywords", INDEXED_CASES)
def test_compiled_indexed_matches_reference(cuda, name, shape, lead, keywords, dtype, in_place,
                                            monkeypatch):
    """A mask's or rope's table entry on its compiled kernel (fp16 through the fp32 one),
    dispatched though held back (AWAITING_GPU_CHECK) and its fallback made to fail:
    Fortran tiles, masks over one to three leading dims, offsets; in place, the output
    the last input (y = x, dst = src, dx += ... of dy). The masks select: bitwise."""
    cupy, table = cuda
    entry = table[name]
    monkeypatch.setattr(entry, "dispatch", True)
    monkeypatch.setattr(entry, "fallback", _no_fallback)
    tiles = indexed_arrays(name, shape, lead, np.dtype(dtype), np.random.default_rng(lead))
    got, expected = _on_device(cupy, entry, name, tiles,
                                         len(tiles) - 2 if in_place else None, keywords)
    rtol, atol = TOLERANCE[dtype] if INDEXED[name].paired else (0.0, 0.0)
    np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol)


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16"])
@pytest.mark.parametrize("name, shape, keywords", LOSS_CASES)
def test_compiled_loss_matches_reference(cuda, name, shape, keywords, dtype, monkeypatch):
    """A loss's class-tile entry (cross_entropy_backward's: the step after the table's
    logsumexp) on its compiled kernel (fp16 through the fp32 one), dispatched though held
    back (AWAITING_GPU_CHECK) and its fallback made to fail: positions of one to three
    dims, class tiles at an offset, ignored labels; then cross_entropy_backward's whole
    entry (the table's logsumexp, then that kernel) on fp32 and fp64 tiles."""
    cupy, table = cuda
    kernel = table[name]
    entry = getattr(kernel, "step", kernel)
    monkeypatch.setattr(entry, "dispatch", True)
    monkeypatch.setattr(entry, "fallback", _no_fallback)
    expected = getattr(reference.KERNELS[name], "step", reference.KERNELS[name])
    tiles = loss_arrays(name, shape, keywords, np.dtype(dtype), np.random.default_rng(3))
    got, want = _on_device(cupy, entry, name, tiles, None, keywords, expected)
    rtol, atol = TOLERANCE[dtype]
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
    if entry is not kernel and dtype != "float16":
        whole = [tile for index, tile in enumerate(tiles) if index != 1]   # no lse
        got, want = _on_device(cupy, kernel, name, whole, None, {"alpha": keywords["alpha"]})
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
