"""The dispatch of the broadcast rules cuda.py compiles (nntile_kernels/compiled_broadcast.py),
on the CPU, running the very text a GPU would compile.

The stand-in compiler returns each rule's CUDA text (rules_cuda_broadcast.py) built for
the host and called as CuPy calls an ElementwiseKernel (host_rules.HostKernel: 1-d
elementwise arrays of the output's size, raw partners, int sizes, float params, then
the output), so a wrong fold, view or argument order shows as a wrong result or a
refused call. Fortran-ordered tiles of uneven shapes, every axis, fibers with and
without a batch dim, 16-bit tiles through the fp32 kernel, beta == 0 with garbage in
what is not read, the output in place of each full input: equal to the reference. What
the kernel's index arithmetic does not describe takes the fallback.
"""

import inspect

import ml_dtypes
import numpy as np
import pytest
from helpers import (BROADCAST_PARAMS, broadcast_arrays, broadcast_cases, broadcast_param_cases,
                     kernel_keywords, partner_of)
from host_rules import (assert_fallback_takes, broadcast_function, broadcast_kernel, host_entry,
                        host_source, run_both)
from host_cpp import host_library as compile_host_library

from nntile_kernels import reference
from nntile_kernels.compiled_broadcast import CompiledBroadcast
from nntile_kernels.formulas import BROADCAST

SHAPE = (4, 5, 3, 2)
BF16 = np.dtype(ml_dtypes.bfloat16)
# those of test_broadcast_rules_cpp.py; a 16-bit tile two of its ulps (the fp32 results
# of C++ and NumPy differ by a few fp32 ulps, which may round either way)
TOLERANCE = {"float64": 1e-13, "float32": 2e-5, "float16": 2.0 ** -9, "bfloat16": 2.0 ** -6}


@pytest.fixture(scope="module")
def host_library(tmp_path_factory):
    return compile_host_library(tmp_path_factory.mktemp("compiled_broadcast"),
                                host_source(BROADCAST, broadcast_function))


def entry(host_library, name, fallback=None, dispatch=True):
    """(CompiledBroadcast of `name` on the host kernels, the kernels' recorded calls)."""
    return host_entry(CompiledBroadcast, BROADCAST, broadcast_kernel, host_library, name,
                      fallback, dispatch)


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", BF16.name])
@pytest.mark.parametrize("name, axis, batch_ndim", broadcast_cases(SHAPE))
def test_dispatched_kernel_equals_the_reference(host_library, name, axis, batch_ndim, dtype):
    kernel, calls = entry(host_library, name)
    arrays = broadcast_arrays(name, SHAPE, axis, batch_ndim, np.dtype(dtype),
                              np.random.default_rng(axis + 10 * batch_ndim))
    kernel_dtype = "float64" if dtype == "float64" else "float32"
    for params, tiles in broadcast_param_cases(name, arrays):
        got, expected = run_both(kernel, name, tiles, None,
                                 kernel_keywords(BROADCAST[name].shape, axis, batch_ndim, params))
        assert calls.pop() == (kernel_dtype, False) and not calls
        assert not np.isnan(expected).any()
        np.testing.assert_allclose(got, expected, rtol=TOLERANCE[dtype], atol=TOLERANCE[dtype],
                                   err_msg=f"{name} {params}")


@pytest.mark.parametrize("dtype", ["float64", "float32", BF16.name])
@pytest.mark.parametrize("name", sorted(name for name, b in BROADCAST.items()
                                        if set(b.rule.inputs) - set(b.partners)))
def test_the_output_in_place_of_a_full_input(host_library, name, dtype):
    """The output is the very array of each full input in turn (generic.py's convention:
    an output may be an input): the kernel gets one view for both, as CuPy's in-place
    case wants."""
    kernel, calls = entry(host_library, name)
    broadcast = BROADCAST[name]
    axis, batch_ndim = 1, (1 if broadcast.shape == "fiber" else 0)
    arrays = broadcast_arrays(name, SHAPE, axis, batch_ndim, np.dtype(dtype),
                              np.random.default_rng(5))
    keywords = kernel_keywords(broadcast.shape, axis, batch_ndim, BROADCAST_PARAMS.get(name, {}))
    for position in [i for i, a in enumerate(broadcast.rule.inputs)
                     if a not in broadcast.partners]:
        got, expected = run_both(kernel, name, arrays, position, keywords)
        assert calls.pop() == ("float64" if dtype == "float64" else "float32", True)
        np.testing.assert_allclose(got, expected, rtol=TOLERANCE[dtype], atol=TOLERANCE[dtype])


def _off_axis(name, shape, axis, batch_ndim):
    """Partners of another axis's shape than the call's."""
    return [np.zeros(partner_of(name, shape, (axis + 1) % len(shape), batch_ndim), order="F")
            if a in BROADCAST[name].partners else np.zeros(shape, order="F")
            for a in (*BROADCAST[name].rule.inputs, BROADCAST[name].rule.output)]


def _fallback_cases(name):
    """(why, arrays, axis, batch_ndim) of calls the compiled kernel must not take."""
    broadcast, shape = BROADCAST[name], (4, 5, 3)
    tiles = broadcast_arrays(name, shape, 0, 0, np.float32, np.random.default_rng(0))
    partners = [i for i, a in enumerate(broadcast.rule.inputs) if a in broadcast.partners]
    cases = [("mixed dtypes", [a.astype(np.float64) if i == partners[0] else a
                               for i, a in enumerate(tiles)], 0, 0),
             ("integer tiles", [np.zeros_like(a, np.int64) for a in tiles], 0, 0),
             ("not Fortran-contiguous", [np.concatenate([a, a])[::2] if a.ndim == 3 else a
                                         for a in tiles], 0, 0),
             ("C-ordered", [np.ascontiguousarray(a) for a in tiles], 0, 0),
             ("a Python float for a tile", [*tiles[:-1], 1.0], 0, 0)]
    if broadcast.shape != "scalar":
        cases += [("a partner of another axis", _off_axis(name, shape, 0, 0), 0, 0),
                  ("axis past the last dim", tiles, 3, 0), ("a negative axis", tiles, -3, 0)]
    if broadcast.shape == "fiber":
        cases.append(("axis among the batch dims", tiles, 2, 1))
    if broadcast.shape == "scalar":
        cases.append(("a partner of one element, not 0-d",
                      [a.reshape(1) if a.ndim == 0 else a for a in tiles], 0, 0))
    return cases


@pytest.mark.parametrize("name", sorted(BROADCAST))
def test_what_the_kernel_does_not_describe_takes_the_fallback(host_library, name):
    assert_fallback_takes(host_library, entry, name, [
        (why, arrays, kernel_keywords(BROADCAST[name].shape, axis, batch_ndim,
                                      BROADCAST_PARAMS.get(name, {})))
        for why, arrays, axis, batch_ndim in _fallback_cases(name)])


def test_a_kernel_held_back_is_compiled_but_its_entry_takes_the_fallback(host_library):
    """dispatch=False (compiled_rules.AWAITING_GPU_CHECK): the kernels exist for the GPU
    tests, the table entry runs cuda.py's earlier kernel."""
    taken = []
    kernel, calls = entry(host_library, "add_slice", lambda *a, **k: taken.append(k),
                          dispatch=False)
    assert set(kernel.compiled) == {"float32", "float64"}
    arrays = broadcast_arrays("add_slice", SHAPE, 1, 0, np.float32, np.random.default_rng(1))
    kernel(*arrays, axis=1, beta=0.0)
    assert not calls and taken == [{"axis": 1, "beta": 0.0}]


@pytest.mark.parametrize("name", sorted(BROADCAST))
def test_the_entry_has_the_reference_signature(host_library, name):
    kernel, _ = entry(host_library, name)
    assert inspect.signature(kernel) == inspect.signature(reference.KERNELS[name])
