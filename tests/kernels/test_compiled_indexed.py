"""The dispatch of the indexed rules cuda.py compiles (nntile_kernels/compiled_indexed.py:
the masks, rope), on the CPU, running the very text a GPU would compile: each rule's
CUDA text (rules_cuda_indexed.py) built for the host and called as CuPy calls an
ElementwiseKernel (host_rules.HostKernel; rope's all-raw kernels with the launch's
size). Fortran-ordered tiles of uneven shapes, masks over one to three leading dims,
offsets, 16-bit tiles through the fp32 kernel, in place: equal to the reference; what
the index arithmetic does not describe takes the fallback."""

import inspect

import ml_dtypes
import numpy as np
import pytest
from helpers import INDEXED_CASES, indexed_arrays
from host_cpp import host_library as compile_host_library
from host_rules import (assert_fallback_takes, host_entry, host_source, indexed_function,
                        indexed_kernel, run_both)

from nntile_kernels import reference
from nntile_kernels.compiled_indexed import CompiledIndexed
from nntile_kernels.formulas import INDEXED

BF16 = np.dtype(ml_dtypes.bfloat16)
# the masks select (bitwise); rope those of test_indexed_rules.py, a 16-bit tile two of
# its ulps (the fp32 results of C++ and NumPy may round either way)
TOLERANCE = {"float64": 1e-13, "float32": 2e-6, "float16": 2.0 ** -9, "bfloat16": 2.0 ** -6}


@pytest.fixture(scope="module")
def host_library(tmp_path_factory):
    return compile_host_library(tmp_path_factory.mktemp("compiled_indexed"),
                                host_source(INDEXED, indexed_function))


def entry(host_library, name, fallback=None, dispatch=True):
    """(CompiledIndexed of `name` on the host kernels, the kernels' recorded calls)."""
    return host_entry(CompiledIndexed, INDEXED, indexed_kernel, host_library, name,
                      fallback, dispatch)


@pytest.mark.parametrize("in_place", [False, True], ids=["", "in_place"])
@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", BF16.name])
@pytest.mark.parametrize("name, shape, lead, keywords", INDEXED_CASES)
def test_dispatched_kernel_equals_the_reference(host_library, name, shape, lead, keywords,
                                                dtype, in_place):
    kernel, calls = entry(host_library, name)
    arrays = indexed_arrays(name, shape, lead, np.dtype(dtype), np.random.default_rng(lead))
    got, expected = run_both(kernel, name, arrays, len(arrays) - 2 if in_place else None,
                             keywords)
    assert calls == [("float64" if dtype == "float64" else "float32", in_place)]
    tolerance = TOLERANCE[dtype] if INDEXED[name].paired else 0.0
    np.testing.assert_allclose(got, expected, rtol=tolerance, atol=tolerance)


def _fallback_cases(name):
    """(why, arrays, keywords) of calls the compiled kernel must not take."""
    _, shape, lead, keywords = next(case for case in INDEXED_CASES if case[0] == name)
    tiles = indexed_arrays(name, shape, lead, np.float32, np.random.default_rng(0))
    floats = [i for i, a in enumerate(tiles) if a.dtype != bool]
    cases = [("mixed dtypes", [a.astype(np.float64) if i == floats[0] else a
                               for i, a in enumerate(tiles)]),
             ("integer tiles", [a if a.dtype == bool else np.zeros_like(a, np.int64)
                                for a in tiles]),
             ("not Fortran-contiguous", [np.concatenate([a, a])[::2] for a in tiles]),
             ("C-ordered", [np.ascontiguousarray(a) for a in tiles]),
             ("tiles of two shapes", [*tiles[:-1], np.zeros(shape[:-1] + (1,), np.float32)])]
    if name == "mask_causal":
        cases.append(("one dim, no query axis", [np.zeros(5, np.float32)] * 2))
    if name == "mask_scalar":
        cases += [("a float mask", [tiles[0].astype(np.float32), *tiles[1:]]),
                  ("a mask of other dims", [np.zeros(shape[1:lead + 1], bool, order="F"),
                                            *tiles[1:]])]
    if INDEXED[name].paired:
        odd = np.zeros((shape[0] - 1, *shape[1:]), np.float32, order="F")
        cases += [("an odd head_dim", [*tiles[:2], odd, odd]),
                  ("sin and cos of two shapes", [tiles[0], tiles[1][:1].copy(order="F"),
                                                 *tiles[2:]]),
                  ("tables of other dims", [np.zeros(shape[1:lead + 1], np.float32, order="F")] * 2
                   + tiles[2:])]
    return [(why, arrays, keywords) for why, arrays in cases]


@pytest.mark.parametrize("name", sorted(INDEXED))
def test_what_the_kernel_does_not_describe_takes_the_fallback(host_library, name):
    assert_fallback_takes(host_library, entry, name, _fallback_cases(name))


def test_a_kernel_held_back_is_compiled_but_its_entry_takes_the_fallback(host_library):
    taken = []
    kernel, calls = entry(host_library, "mask_causal", lambda *a, **k: taken.append(k),
                          dispatch=False)
    assert set(kernel.compiled) == {"float32", "float64"}
    kernel(*indexed_arrays("mask_causal", (5, 7), 0, np.float32, np.random.default_rng(1)),
           val=0.0)
    assert not calls and taken == [{"val": 0.0}]


@pytest.mark.parametrize("name", sorted(INDEXED))
def test_the_entry_has_the_reference_signature(host_library, name):
    kernel, _ = entry(host_library, name)
    assert inspect.signature(kernel) == inspect.signature(reference.KERNELS[name])
