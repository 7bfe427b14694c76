"""MPI ranks sharing one GPU compute what one rank computes (fp64, to 1e-12).

    mpiexec -n 2 python -m pytest --with-mpi -m gpu -p no:cacheprovider tests/gpu/test_gpu_mpi.py
    mpiexec -n 4 python -m pytest --with-mpi -m gpu -p no:cacheprovider tests/gpu/test_gpu_mpi.py

Marked gpu and mpi. Every rank runs the job on MPI.COMM_WORLD with device="cuda" (all
on the one GPU: tiles cross ranks through host staging) and, alone, the same job on one
simulated rank of the GPU; the two must agree to 1e-12 under every preset (and the
fsdp x tp mesh on 4 ranks). Once, host staging sent C-ordered copies into Fortran
buffers, so every 2-D tile arrived transposed; the gemm cases (uneven rectangular
tiles) and two AdamW steps of a small GPT-2 show such a fault at once. With an MPI
that reports CUDA support the GPT-2 steps also run CUDA-aware (device buffers fenced
by CUDA events, runtime/kernel_fences.py).
"""

import ctypes

import numpy as np
import pytest
from helpers import adamw_gpt2_steps, collective_ok, guarded, run_case
from tests.runtime.op_cases import GEMM_CASES

import nntile_spmd as nt

pytestmark = [pytest.mark.gpu, pytest.mark.mpi(min_size=2)]
TIMEOUT = 120.0     # seconds a rank may wait for another (a first CuPy compile is slow)
TOLERANCE = 1e-12


def presets(size):
    meshes = [{"fsdp": 2, "tp": 2}] if size == 4 else []
    return ["single", "ddp", "fsdp", "tp", *meshes]


def comm():
    from mpi4py import MPI
    return MPI.COMM_WORLD


@pytest.fixture(scope="module")
def one_rank_gpt2():
    """The GPT-2 AdamW steps on one simulated rank of this GPU."""
    return adamw_gpt2_steps("single", comm=nt.SimulatedWorld(1), device="cuda")[1]


def differences(values, expected):
    return [f"{name}: max error {np.max(np.abs(values[name] - want)):.3g}"
            for name, want in expected.items()
            if not np.allclose(values[name], want, rtol=TOLERANCE, atol=TOLERANCE)]


def gpt2_problems(preset, expected):
    cg, values = adamw_gpt2_steps(preset, comm=None, device="cuda", recv_timeout=TIMEOUT)
    problems = [] if cg.device.name == "cuda" else [f"ran on {cg.device.name}"]
    return problems + differences(values, expected)


@pytest.mark.parametrize("preset", presets(4), ids=str)
def test_gpt2_adamw_on_ranks_sharing_the_gpu_equals_one_rank(preset, one_rank_gpt2):
    if isinstance(preset, dict) and comm().Get_size() != 4:
        pytest.skip(f"the fsdp x tp mesh needs 4 ranks, this world has {comm().Get_size()}; "
                    "scripts/gpu-check runs it in its mpi-4-ranks part")
    problems = guarded(gpt2_problems, preset, one_rank_gpt2)
    assert collective_ok(comm(), not problems), problems


@pytest.mark.parametrize("preset", presets(1), ids=str)
@pytest.mark.parametrize("case", GEMM_CASES, ids=str)
def test_gemm_on_ranks_sharing_the_gpu_equals_numpy(case, preset):
    """Uneven rectangular tiles (2 on dims of 5 and 3): a transposed tile is wrong."""
    sizes = dict.fromkeys(case.letters(), 5) | dict.fromkeys(case.letters()[1::2], 3)
    problems = guarded(run_case, case, sizes, None, preset, tiles=dict.fromkeys(sizes, 2),
                       rtol=TOLERANCE, device="cuda", recv_timeout=TIMEOUT)
    assert collective_ok(comm(), not problems), problems


def mpi_cuda_support():
    """True where the MPI library says it takes device buffers (MPIX_Query_cuda_support:
    Open MPI, MPICH >= 4); the pip wheels say no or lack it."""
    try:
        return bool(ctypes.CDLL(None).MPIX_Query_cuda_support())
    except (AttributeError, OSError):
        return False


@pytest.mark.parametrize("preset", ["ddp", "fsdp", "tp"])
def test_cuda_aware_ranks_equal_one_rank(preset, one_rank_gpt2, monkeypatch):
    supported = comm().allreduce(int(mpi_cuda_support()), op=__import__("mpi4py").MPI.MIN)
    if not supported:
        pytest.skip("this MPI library is not CUDA-aware (MPIX_Query_cuda_support is 0 on some "
                    "rank); runs where it reports CUDA support")
    monkeypatch.setenv("NNTILE_SPMD_CUDA_AWARE", "1")
    problems = guarded(gpt2_problems, preset, one_rank_gpt2)
    assert collective_ok(comm(), not problems), problems
