"""Llama parity with transformers on real MPI ranks (every preset, both tilings):
    mpiexec -n 3 python -m pytest --with-mpi -m mpi -p no:cacheprovider tests/models
Rank 0 computes the HF reference and sends it to every rank (the others never
import torch); each rank checks its own view, and the ranks then agree on one
verdict, so a failing rank never leaves others waiting."""

import pytest
from gpt2_helpers import parity_problems
from llama_helpers import SMALL_TILES, hf_reference, run_ours
from helpers import assert_no_rank_has_problems, on_rank_zero

# Not four_ranks: on 4 ranks these reached no line or branch of nntile_spmd that the
# 3-rank tier and the 4-rank tier's other tests do not (docs/testing.md); 4 ranks check
# parity on 2 x 2 meshes, dp x pp and fsdp x cp (test_gpt2_mesh_mpi.py,
# test_gpt2_pipeline_mpi.py, test_cp_mpi.py).

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
