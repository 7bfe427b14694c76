"""compile_async and the plan cache on real MPI ranks: the next graph is planned in
the background while the current one executes, and every rank gets the same losses
as a plain compile.

    mpiexec -n 2 python -m pytest --with-mpi -p no:cacheprovider tests/plan/test_plan_cache_mpi.py
"""

import pytest
from helpers import collective_ok
from mpi4py import MPI
from test_plan_cache import mlp_graph, run_mlp

import nntile_spmd as nt

pytestmark = pytest.mark.mpi(min_size=2)
COMM = MPI.COMM_WORLD


@pytest.mark.parametrize("preset", ["ddp", "fsdp", "tp"])
def test_planning_the_next_graph_while_executing_this_one(preset, tmp_path):
    problems = []
    try:
        reference = run_mlp(nt.compile(mlp_graph(), distribution=preset))
        cache = nt.PlanCache()
        current = nt.compile(mlp_graph(), distribution=preset, cache=cache)
        pending = nt.compile_async(mlp_graph(), distribution=preset, cache=cache)
        losses = [run_mlp(current), run_mlp(pending.result())]
        if losses != [reference, reference]:
            problems.append(f"rank {COMM.rank}: losses {losses}, plain compile {reference}")
        if cache.stats.misses != 1 or cache.stats.hits != 1:
            problems.append(f"rank {COMM.rank}: cache {cache.stats}")
    except Exception as error:   # noqa: BLE001 - reported through the verdict
        problems.append(f"{type(error).__name__}: {error}")
    assert collective_ok(COMM, not problems), problems
