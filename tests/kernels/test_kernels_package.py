"""The kernels package entry points: get_kernels, KERNEL_NAMES, and what importing loads."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

import nntile_kernels

ROOT = Path(nntile_kernels.__file__).resolve().parents[1]


def test_kernel_names_are_sorted_and_unique():
    """KERNEL_NAMES is the sorted tuple of the contract's kernel names."""
    assert isinstance(nntile_kernels.KERNEL_NAMES, tuple)
    assert list(nntile_kernels.KERNEL_NAMES) == sorted(set(nntile_kernels.KERNEL_NAMES))


@pytest.mark.parametrize("backend", ["reference", "cpu"])
def test_get_kernels_returns_the_backend_table(backend):
    """get_kernels(name) is that module's KERNELS dict, with every kernel name."""
    table = nntile_kernels.get_kernels(backend)
    assert table is importlib.import_module(f"nntile_kernels.{backend}").KERNELS
    assert sorted(table) == list(nntile_kernels.KERNEL_NAMES)


def test_get_kernels_rejects_unknown_backends():
    """A typo names the valid choices."""
    with pytest.raises(ValueError, match="reference"):
        nntile_kernels.get_kernels("gpu")


def _fresh_python(code):
    """Run `code` in a new interpreter rooted at the repository; return its stdout."""
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return result.stdout.strip()


def test_importing_kernels_loads_no_backend():
    """`import nntile_kernels` pulls in neither cupy, numba nor numpy, nor do its formulas
    (pure text, read by the generators too); the reference needs no numba."""
    loaded = _fresh_python(
        "import sys, nntile_kernels, nntile_kernels.formulas\n"
        "heavy = ('cupy', 'numba', 'numpy', 'mpi4py', 'nntile_spmd')\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
        "nntile_kernels.get_kernels('reference')\n"
        "print(sorted(m for m in heavy if m != 'numpy' and m in sys.modules))"
    )
    assert loaded.splitlines() == ["[]", "[]"]


def test_cpu_backend_does_not_import_cupy():
    """The numba backend never touches CuPy or MPI."""
    loaded = _fresh_python(
        "import sys, nntile_kernels\nnntile_kernels.get_kernels('cpu')\n"
        "print(sorted(m for m in ('cupy', 'mpi4py', 'nntile_spmd') if m in sys.modules))"
    )
    assert loaded == "[]"


@pytest.mark.skipif(importlib.util.find_spec("cupy") is not None, reason="CuPy is installed")
def test_cuda_backend_without_cupy_says_what_is_missing():
    """Without CuPy, asking for the cuda table is a clear ImportError."""
    with pytest.raises(ImportError, match="CuPy"):
        nntile_kernels.get_kernels("cuda")
