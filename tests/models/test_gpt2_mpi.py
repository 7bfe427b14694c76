"""GPT-2 parity with transformers on real MPI ranks (every preset, both tilings):
    mpiexec -n 3 python -m pytest --with-mpi -m mpi -p no:cacheprovider tests/models
Rank 0 computes the HF reference and sends it to every rank (the others never
import torch); each rank checks its own view, and the ranks then agree on one
verdict, so a failing rank never leaves others waiting."""

import pytest
from gpt2_helpers import SMALL_TILES, hf_reference, parity_problems, run_ours
from helpers import assert_no_rank_has_problems, on_rank_zero

pytestmark = pytest.mark.four_ranks

mpi4py = pytest.importorskip("mpi4py")
from mpi4py import MPI  # noqa: E402


@pytest.fixture(scope="module")
def reference():
    return on_rank_zero(MPI.COMM_WORLD, hf_reference)


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
    assert_no_rank_has_problems(comm, problems)
