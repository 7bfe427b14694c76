"""Every fast backend against the NumPy reference, one table line per case.

Backends: cpu (numba/BLAS) and cuda (CuPy on a GPU; marked gpu, skipped without
one). The CuPy table shares its code with the reference (nntile_kernels/generic*.py and the
rules of nntile_kernels/formulas/), so what is CUDA's own is tested in tests/gpu.
The cases are kernel_cases.py's.
"""

import inspect

import numpy as np
import pytest
from kernel_cases import CASES, DTYPES, TOLERANCE, distinct, make_arrays

import nntile_kernels
from nntile_kernels import cpu, reference


def run_reference(name, args, params, dtype):
    """The reference's arrays after the call."""
    arrays = make_arrays(args, dtype)
    assert reference.KERNELS[name](*arrays, **params) is None
    return arrays


# ---------------------------------------------------------------- backends


def _cuda_backend():
    """(KERNELS, to_device, to_host) of the real CuPy backend (gpu-marked: conftest skips
    it without CuPy or a device)."""
    import cupy

    from nntile_kernels import cuda

    return cuda.KERNELS, lambda a: cupy.array(a, order="F"), cupy.asnumpy


def _identity(array):
    return array


@pytest.fixture(scope="module", params=["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def backend(request):
    """(KERNELS, to_device, to_host) of each backend under test."""
    if request.param == "cpu":
        return cpu.KERNELS, _identity, _identity
    return _cuda_backend()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("name", "args", "params"), CASES)
def test_backend_matches_reference(backend, name, args, params, dtype):
    """Same arrays in, same arrays out (inputs untouched, outputs written, aliases kept)."""
    table, to_device, to_host = backend
    expected = run_reference(name, args, params, dtype)
    host = make_arrays(args, dtype)
    device = {id(a): to_device(a) for a in host}
    arrays = [device[id(a)] for a in host]
    assert table[name](*arrays, **params) is None
    rtol, atol = TOLERANCE[dtype]
    for position in distinct(host):
        got = to_host(arrays[position])
        assert got.dtype == expected[position].dtype, f"argument {position}"
        # NaN anywhere but in an unread input means some garbage was read.
        garbage_allowed = args[position].kind == "unread"
        assert garbage_allowed or not np.isnan(expected[position]).any(), f"reference {position}"
        np.testing.assert_allclose(
            got,
            expected[position],
            rtol=rtol,
            atol=atol,
            equal_nan=garbage_allowed,
            err_msg=f"{name}: argument {position}",
        )


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(
    ("name", "args", "params"), [c for c in CASES if any(a.kind == "same" for a in c.values[1])]
)
def test_reference_aliasing_equals_separate_buffers(name, args, params, dtype):
    """An aliased output ends as it would in a separate buffer that started as a copy."""
    aliased = run_reference(name, args, params, dtype)
    separate = make_arrays(args, dtype)
    separate = [a.copy(order="F") if arg.kind == "same" else a for a, arg in zip(separate, args)]
    reference.KERNELS[name](*separate, **params)
    for position, arg in enumerate(args):
        if arg.kind == "same":
            np.testing.assert_array_equal(aliased[position], separate[position])


@pytest.mark.parametrize("name, extra", [("cross_entropy_lse", ()),
                                         ("cross_entropy_lse_backward", ("dloss",))])
@pytest.mark.parametrize("bad", [7, -3])
def test_cross_entropy_lse_rejects_labels_outside_the_classes(backend, name, extra, bad):
    """Class tile 0 checks every label that is not ignore_index (numba does no bounds
    checks), naming the offending value; the other class tiles leave them to it."""
    table, to_device, _ = backend
    logits, lse, labels = np.ones((3, 4), order="F"), np.zeros(4), np.array([0, -100, bad, 2])
    scalars = [np.array(2.0) for _ in extra]
    arrays = [logits, lse, labels, np.array(3.0), *scalars, np.zeros((3, 4), order="F")]
    arrays = arrays if name.endswith("backward") else arrays[:4] + [np.array(0.0)]
    device = [to_device(a) for a in arrays]
    with pytest.raises(IndexError, match=f"labels hold {bad}, outside the class range \\[0, 6\\)"):
        table[name](*device, num_classes=6)
    table[name](*device, num_classes=6, class_offset=3)   # not class tile 0: no check


@pytest.mark.parametrize("name", ["cross_entropy", "cross_entropy_backward"])
@pytest.mark.parametrize("bad", [3, -1])
def test_cross_entropy_rejects_labels_outside_the_classes(backend, name, bad):
    """A label outside [0, classes) raises on every backend (CuPy's take_along_axis
    would wrap it to some class, NumPy's indexing would wrap -1)."""
    table, to_device, _ = backend
    logits, labels = np.ones((3, 4), order="F"), np.array([0, 1, bad, 2])
    outputs = [np.array(2.0), np.zeros((3, 4), order="F")] if name.endswith("backward") \
        else [np.array(0.0)]
    device = [to_device(a) for a in (logits, labels, *outputs)]
    with pytest.raises(IndexError, match="cross_entropy.*(outside the class range|out of range)"):
        table[name](*device)
    if table is cpu.KERNELS:   # the generic kernels, which cuda binds to CuPy, raise too
        with pytest.raises(IndexError, match=f"{name}: labels hold {bad}, outside the class"):
            reference.KERNELS[name](logits, labels, *outputs)


# ---------------------------------------------------------------- table-wide contracts


def test_every_kernel_has_cases():
    """Each kernel of the contract appears in the table above."""
    assert {c.values[0] for c in CASES} == set(nntile_kernels.KERNEL_NAMES)


def test_backend_tables_have_the_same_keys():
    """cpu, reference and the package's name list agree (cuda: tests/gpu)."""
    assert set(cpu.KERNELS) == set(reference.KERNELS) == set(nntile_kernels.KERNEL_NAMES)


@pytest.mark.parametrize("name", nntile_kernels.KERNEL_NAMES)
def test_signatures_match_reference(name):
    """Same parameter names, kinds and defaults on every backend: callers pass **params."""
    expected = inspect.signature(reference.KERNELS[name])
    assert inspect.signature(cpu.KERNELS[name]) == expected


@pytest.mark.parametrize("name", ["embedding", "embedding_backward"])
@pytest.mark.parametrize("bad_id", [-1, 9, 40])
def test_embedding_ids_outside_the_vocabulary_raise(backend, name, bad_id):
    """An id outside the whole vocabulary (9 columns, this tile holding 3..5) raises,
    naming the id; ids of other tiles (0, 8) are skipped as before."""
    table, to_device, _ = backend
    index = to_device(np.array([[0, 4, bad_id], [8, 3, 5]]))
    vocab = to_device(np.ones((4, 3), order="F"))   # [E, this tile's 3 columns]
    vectors = to_device(np.ones((2, 4, 3), order="F"))  # E at axis 1
    arrays = (index, vocab, vectors) if name == "embedding" else (index, vectors, vocab)
    with pytest.raises(IndexError, match=rf"id {bad_id}, outside the vocabulary \[0, 9\)"):
        table[name](*arrays, axis=1, vocab_size=9, vocab_offset=3)


def _origin(name):
    """Where the cpu table's entry comes from: the reference's own function (one text
    for both tables), a loop generated from a rule, a composite of other entries, or a
    loop written by hand in a cpu_*.py module."""
    kernel = cpu.KERNELS[name]
    if kernel is reference.KERNELS.get(name):
        return "reference"
    module = getattr(kernel, "__module__", None) or type(kernel).__module__
    if module.startswith("nntile_kernels.cpu_rules"):
        return "generated"
    if module.startswith("nntile_kernels.cpu"):
        return "hand-written"
    return "composite"


def test_every_hand_written_cpu_loop_is_declared():
    """Each formula is written once: the cpu table's loops are generated from rules, or
    are the reference's own functions, or compose other entries; the few written by
    hand beside the reference's expression are exactly cpu.HAND_WRITTEN, each with why."""
    origins = {name: _origin(name) for name in cpu.KERNELS}
    assert {name for name, origin in origins.items() if origin == "hand-written"} == \
        set(cpu.HAND_WRITTEN)
    assert all(reason for reason in cpu.HAND_WRITTEN.values())
    assert origins["softmax_backward"] == "composite" and origins["gelu"] == "generated"
