"""GPT-2 and Llama against transformers in fp64 on the GPU, on every MPI rank of the job.

    mpiexec -n 1 python -m pytest --with-mpi -m gpu -p no:cacheprovider tests/gpu/test_gpu_parity.py
    mpiexec -n 2 python -m pytest --with-mpi -m gpu -p no:cacheprovider tests/gpu/test_gpu_parity.py

Marked gpu and mpi: it runs on MPI.COMM_WORLD with device="cuda", every rank on the one
GPU of the machine (tiles cross ranks through host staging, or device buffers with
NNTILE_SPMD_CUDA_AWARE=1). Every rank computes the HF reference itself and checks its
own view; the ranks agree on one verdict. Once, two ranks on an H100 computed a
wrong gemm that single-process GPU tests and simulated ranks could not see.
"""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "models"))   # the helpers
from gpt2_helpers import SMALL_TILES as GPT2_SMALL_TILES  # noqa: E402
from gpt2_helpers import hf_reference as gpt2_reference  # noqa: E402
from gpt2_helpers import parity_problems  # noqa: E402
from gpt2_helpers import run_ours as run_gpt2  # noqa: E402
from llama_helpers import SMALL_TILES as LLAMA_SMALL_TILES  # noqa: E402
from llama_helpers import hf_reference as llama_reference  # noqa: E402
from llama_helpers import run_ours as run_llama  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.mpi(min_size=1)]

MODELS = {"gpt2": (gpt2_reference, run_gpt2, GPT2_SMALL_TILES),
          "llama": (llama_reference, run_llama, LLAMA_SMALL_TILES)}


@pytest.fixture(scope="module")
def references():
    """{model: the HF reference} (computed once per rank, on the CPU in fp64)."""
    return {name: reference() for name, (reference, _, _) in MODELS.items()}


@pytest.mark.parametrize("small_tiles", [False, True], ids=["auto", "small"])
@pytest.mark.parametrize("distribution", ["single", "ddp", "fsdp", "tp"])
@pytest.mark.parametrize("model_name", sorted(MODELS))
def test_parity_with_transformers_on_gpu_ranks(references, model_name, distribution,
                                               small_tiles):
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    _, run, tiles = MODELS[model_name]
    config, state, ids, targets, results = references[model_name]
    try:
        model, cg = run(config, state, ids, targets, None, distribution,
                        tiles if small_tiles else None, device="cuda")
        problems = [] if cg.device.name == "cuda" else [f"ran on {cg.device.name}"]
        problems += parity_problems(model, cg, results)
    except Exception as error:   # reported collectively below
        problems = [f"{type(error).__name__}: {error}"]
    failures = [f"rank {rank}: {p}" for rank, ps in enumerate(comm.allgather(problems))
                for p in ps]
    assert not failures, "; ".join(failures[:10])
