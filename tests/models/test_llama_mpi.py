"""Llama parity with transformers on real MPI ranks (every preset, both tilings):
    mpiexec -n 3 python -m pytest --with-mpi -m mpi -p no:cacheprovider tests/models
Every rank computes the HF reference itself (same seed) and checks its own view;
the ranks then agree on one verdict, so a failing rank never leaves others waiting."""

import pytest
from gpt2_helpers import parity_problems
from llama_helpers import SMALL_TILES, hf_reference, run_ours

pytestmark = pytest.mark.four_ranks

mpi4py = pytest.importorskip("mpi4py")
from mpi4py import MPI  # noqa: E402


@pytest.fixture(scope="module")
def reference():
    return hf_reference()


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("tiles", [None, SMALL_TILES], ids=["auto", "small"])
@pytest.mark.parametrize("distribution", ["single", "ddp", "fsdp", "tp"])
def test_mpi_parity_with_transformers(reference, distribution, tiles):
    comm = MPI.COMM_WORLD
    config, state, ids, targets, results = reference
    try:
        model, cg = run_ours(config, state, ids, targets, comm, distribution, tiles)
        problems = parity_problems(model, cg, results)
    except Exception as error:   # reported collectively below
        problems = [f"{type(error).__name__}: {error}"]
    failures = [f"rank {rank}: {p}" for rank, ps in enumerate(comm.allgather(problems))
                for p in ps]
    assert not failures, "; ".join(failures[:10])
