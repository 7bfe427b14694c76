"""nt.PlanningWorld (docs/design.md): plan one rank of any world without MPI.

Plain pytest. The planned rank's program, memory and traffic equal what a
SimulatedWorld of the same size plans for that rank; execute() and get_output()
raise a clear error; no tile storage is allocated.
"""

import numpy as np
import pytest

import nntile_spmd as nt
from nntile_spmd.models import build_mlp

pytestmark = pytest.mark.mpi_skip


def mlp():
    model = build_mlp((6, 9, 4), 12, dtype="fp64")
    return model.graph, nt.TilingStrategy.manual({"x": [4, 3]})


@pytest.mark.parametrize("preset", ["ddp", "fsdp", "tp"])
def test_planned_rank_equals_the_simulated_worlds_rank(preset):
    graph, tiling = mlp()
    simulated = nt.compile(graph, comm=nt.SimulatedWorld(4), tiling=tiling,
                           distribution=preset)
    for rank in range(4):
        planned = nt.compile(graph, comm=nt.PlanningWorld(4, rank), tiling=tiling,
                             distribution=preset)
        assert planned.program(rank) == simulated.program(rank)
        assert planned.memory_on_rank(rank) == simulated.memory_on_rank(rank)
        assert planned.estimate_communication(rank) == simulated.estimate_communication(rank)
        assert planned.estimate_flops(rank) == simulated.estimate_flops(rank)
        assert planned.fingerprint() == simulated.fingerprint()
        assert not planned.plan._programs, "planned every rank, not one"


def test_a_world_far_beyond_the_machine():
    graph, tiling = mlp()
    cg = nt.compile(graph, comm=nt.PlanningWorld(1024, 5), tiling=tiling, distribution="fsdp")
    assert cg.plan.nranks == 1024 and cg.stores == {}
    assert cg.memory_on_rank(5) > 0
    listing = cg.dump_plan()
    assert "  r5:" in listing and "  r0:" not in listing and "planned alone" in listing


def test_execute_and_get_output_raise():
    graph, tiling = mlp()
    cg = nt.compile(graph, comm=nt.PlanningWorld(3, 1), tiling=tiling, distribution="ddp")
    with pytest.raises(RuntimeError, match=r"execute: PlanningWorld\(3, rank=1\) only plans"):
        cg.execute()
    with pytest.raises(RuntimeError, match="only plans"):
        cg.get_output(graph.tensors()[0].name)
    cg.bind_data("x", np.zeros((6, 12)))   # accepted and ignored: there are no tiles


@pytest.mark.parametrize("size, rank", [(0, 0), (4, 4), (4, -1), (2.0, 0), (True, 0)])
def test_bad_worlds_are_refused(size, rank):
    with pytest.raises(ValueError, match="PlanningWorld"):
        nt.PlanningWorld(size, rank)


def test_default_rank_is_zero():
    assert nt.PlanningWorld(8).rank == 0 and repr(nt.PlanningWorld(8)) == \
        "PlanningWorld(8, rank=0)"
