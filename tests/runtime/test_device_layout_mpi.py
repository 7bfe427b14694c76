"""Tiles of the GPU path keep their memory order over real MPI ranks, on the CPU.

    mpiexec -n 2 python -m pytest --with-mpi -p no:cacheprovider \
        tests/runtime/test_device_layout_mpi.py

The stand-in device (tests/stand_in_device.py) copies to the host as CuPy does, and
the host-staged transport hands those copies to MPI as raw bytes: a C-ordered copy
arrives transposed in the receiver's Fortran buffer (seen on two H100 ranks).
"""

import numpy as np
import pytest
from helpers import adamw_gpt2_steps, collective_ok, guarded, run_case
from mpi4py import MPI
from tests.runtime.op_cases import GEMM_CASES
from stand_in_device import stand_in_device

pytestmark = [pytest.mark.mpi(min_size=2), pytest.mark.two_ranks]
PRESETS = ("ddp", "fsdp", "tp")


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("case", GEMM_CASES, ids=str)
def test_gemm_on_stand_in_gpu_ranks_equals_numpy(case, preset):
    sizes = dict.fromkeys(case.letters(), 5) | dict.fromkeys(case.letters()[1::2], 3)
    problems = guarded(run_case, case, sizes, None, preset, tiles=dict.fromkeys(sizes, 2),
                       device=stand_in_device(), recv_timeout=60.0)
    assert collective_ok(MPI.COMM_WORLD, not problems), problems


@pytest.fixture(scope="module")
def one_rank_gpt2():
    import nntile_spmd as nt
    return adamw_gpt2_steps("single", comm=nt.SimulatedWorld(1), device=stand_in_device())[1]


def gpt2_problems(preset, expected, cuda_aware):
    device = stand_in_device()
    _, values = adamw_gpt2_steps(preset, device=device, recv_timeout=60.0)
    fenced = any(entry[0] == "wait" for entry in device.xp.log)
    problems = [] if fenced == cuda_aware else [f"CUDA event waits: {fenced}"]
    return problems + [name for name, want in expected.items()
                       if not np.allclose(values[name], want, rtol=1e-12, atol=1e-12)]


@pytest.mark.parametrize("cuda_aware", [False, True], ids=["staged", "cuda-aware"])
@pytest.mark.parametrize("preset", PRESETS)
def test_gpt2_on_stand_in_gpu_ranks_equals_one_rank(preset, cuda_aware, one_rank_gpt2,
                                                    monkeypatch):
    """Two AdamW steps, host-staged and CUDA-aware (device buffers to MPI, fenced)."""
    if cuda_aware:
        monkeypatch.setenv("NNTILE_SPMD_CUDA_AWARE", "1")
    problems = guarded(gpt2_problems, preset, one_rank_gpt2, cuda_aware)
    assert collective_ok(MPI.COMM_WORLD, not problems), problems
