"""The dispatch of the losses' class-tile kernels cuda.py compiles
(nntile_kernels/compiled_indexed.CompiledLoss: cross_entropy_lse_backward, and
cross_entropy_backward's step after the table's logsumexp), on the CPU, running the very
text a GPU would compile: each rule's CUDA text (rules_cuda_indexed.cuda_loss_source)
built for the host and called as CuPy calls an ElementwiseKernel (host_rules.HostKernel:
labels int64, columns and 0-d scalars raw). Fortran-ordered tiles of uneven shapes,
positions of one to three dims, class tiles at an offset, ignored labels, accumulated
into and in place: equal to the reference; the labels checked before the launch; what
the kernel does not describe takes the fallback."""

import inspect

import numpy as np
import pytest
from helpers import LOSS_CASES, loss_arrays
from host_cpp import host_library as compile_host_library
from host_rules import (LOSS_RULES, assert_fallback_takes, host_entry, host_source,
                        loss_function, loss_kernel, run_both)

from nntile_kernels import reference
from nntile_kernels.compiled_indexed import CompiledLoss
from nntile_kernels.rules_indexed import AfterLogsumexp

# those of test_compiled_indexed.py (fp32 exp of C++ and NumPy may differ by an ulp; a
# 16-bit tile two of its ulps)
TOLERANCE = {"float64": 1e-13, "float32": 2e-6, "float16": 2.0 ** -9}


@pytest.fixture(scope="module")
def host_library(tmp_path_factory):
    return compile_host_library(tmp_path_factory.mktemp("compiled_loss"),
                                host_source(LOSS_RULES, loss_function))


def entry(host_library, name, fallback=None, dispatch=True):
    """(CompiledLoss of `name`'s rule on the host kernels, the kernels' recorded calls)."""
    return host_entry(CompiledLoss, LOSS_RULES, loss_kernel, host_library, name, fallback,
                      dispatch)


def reference_rule(name):
    """The reference entry of `name`'s rule: the kernel, or the step after its logsumexp."""
    kernel = reference.KERNELS[name]
    return kernel.step if isinstance(kernel, AfterLogsumexp) else kernel


@pytest.mark.parametrize("in_place", [False, True], ids=["", "in_place"])
@pytest.mark.parametrize("dtype", ["float64", "float32", "float16"])
@pytest.mark.parametrize("name, shape, keywords", LOSS_CASES)
def test_dispatched_kernel_equals_the_reference(host_library, name, shape, keywords, dtype,
                                                in_place):
    """dlogits += the rule, or (in place) logits += it: one launch, as the reference."""
    kernel, calls = entry(host_library, name)
    arrays = loss_arrays(name, shape, keywords, np.dtype(dtype), np.random.default_rng(3))
    got, expected = run_both(kernel, name, arrays, 0 if in_place else None, keywords,
                             reference_rule(name))
    assert calls == [("float64" if dtype == "float64" else "float32", in_place)]
    np.testing.assert_allclose(got, expected, rtol=TOLERANCE[dtype], atol=TOLERANCE[dtype])


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_cross_entropy_backward_is_the_table_logsumexp_then_the_kernel(host_library, dtype):
    """The composition cuda.py builds (AfterLogsumexp over the compiled step) equals the
    reference kernel, with its signature."""
    step, calls = entry(host_library, "cross_entropy_backward")
    kernel = AfterLogsumexp("cross_entropy_backward", step, reference.KERNELS, np.empty)
    assert inspect.signature(kernel) == inspect.signature(
        reference.KERNELS["cross_entropy_backward"])
    logits, _, *arrays = loss_arrays("cross_entropy_backward", (6, 4, 3), {"num_classes": 6},
                                     np.dtype(dtype), np.random.default_rng(5))
    got, expected = run_both(kernel, "cross_entropy_backward", [logits, *arrays], None,
                             {"alpha": 0.5})
    assert calls == [(dtype, False)]
    np.testing.assert_allclose(got, expected, rtol=TOLERANCE[dtype], atol=TOLERANCE[dtype])


@pytest.mark.parametrize("name, shape, keywords", [LOSS_CASES[0], LOSS_CASES[-1]])
def test_a_label_outside_the_classes_raises_before_the_launch(host_library, name, shape,
                                                              keywords):
    kernel, calls = entry(host_library, name)
    arrays = loss_arrays(name, shape, keywords, np.dtype(np.float32), np.random.default_rng(4))
    arrays[2][1] = keywords["num_classes"]
    before = arrays[-1].copy()
    with pytest.raises(IndexError, match=f"^{name}: labels hold {keywords['num_classes']}, "):
        kernel(*arrays, **keywords)
    assert not calls
    np.testing.assert_array_equal(arrays[-1], before)


def _fallback_cases(name, shape, keywords):
    """(why, arrays, keywords) of calls the compiled kernel must not take."""
    tiles = loss_arrays(name, shape, keywords, np.dtype(np.float32), np.random.default_rng(0))
    logits, lse, labels, *scalars, out = tiles
    cases = [("mixed dtypes", [logits.astype(np.float64), *tiles[1:]]),
             ("float labels", [logits, lse, labels.astype(np.float32), *scalars, out]),
             ("int32 labels", [logits, lse, labels.astype(np.int32), *scalars, out]),
             ("not Fortran-contiguous", [np.concatenate([logits, logits])[::2], *tiles[1:]]),
             ("C-ordered", [np.ascontiguousarray(logits), *tiles[1:]]),
             ("lse of other dims", [logits, lse[:1].copy(order="F"), *tiles[2:]]),
             ("dloss not 0-d", [*tiles[:-2], tiles[-2].reshape(1), out]),
             ("tiles of two shapes", [*tiles[:-1], out[:1].copy(order="F")])]
    return [(why, arrays, keywords) for why, arrays in cases]


@pytest.mark.parametrize("name", sorted(LOSS_RULES))
def test_what_the_kernel_does_not_describe_takes_the_fallback(host_library, name):
    _, shape, keywords = next(case for case in LOSS_CASES if case[0] == name)
    assert_fallback_takes(host_library, entry, name, _fallback_cases(name, shape, keywords))


def test_a_kernel_held_back_is_compiled_but_its_entry_takes_the_fallback(host_library):
    taken = []
    kernel, calls = entry(host_library, "cross_entropy_lse_backward",
                          lambda *a, **k: taken.append(k), dispatch=False)
    assert set(kernel.compiled) == {"float32", "float64"}
    name, shape, keywords = LOSS_CASES[0]
    kernel(*loss_arrays(name, shape, keywords, np.dtype(np.float32), np.random.default_rng(1)),
           **keywords)
    assert not calls and taken == [keywords]


@pytest.mark.parametrize("name", sorted(LOSS_RULES))
def test_the_entry_has_the_reference_signature(host_library, name):
    kernel, _ = entry(host_library, name)
    assert inspect.signature(kernel) == inspect.signature(reference_rule(name))
