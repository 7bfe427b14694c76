"""Planning at scale: a 48-layer MLP for 64 ranks plans in under 5 s (the plan-speed
requirement), and a narrow version of it runs on a 64-rank SimulatedWorld.
These time the all-ranks build (what a SimulatedWorld runs); one rank planned
alone (an MPI rank, a PlanningWorld) is timed against it at the end.

Plain pytest. The bound is on this process's CPU time (time.process_time), not on
wall time: planning is single-threaded pure Python, and the CI machine is shared,
so wall time would measure the neighbours as well.
"""

import time

import numpy as np
import pytest
from helpers import gelu, stat_problems

import nntile_spmd as nt

LAYERS, RANKS = 48, 64
# single-process tier: under mpiexec every rank would plan at once and time its neighbours
pytestmark = pytest.mark.mpi_skip


def deep_mlp(width, hidden, batch, layers=LAYERS, dtype="fp32"):
    """Layers alternately width -> hidden and hidden -> width: gemm, bias add, gelu
    each (48 layers, 144 ops). No residual adds: they would tie every layer's model
    axis into one class, which the "tp" preset would then split (see the report)."""
    g = nt.LogicalGraph("deep_mlp")
    h = g.tensor([width, batch], "x", dtype=dtype, external=True)          # (width, batch)
    for layer in range(layers):
        out = hidden if layer % 2 == 0 else width
        w = g.tensor([out, h.shape[0]], f"w{layer}", dtype, requires_grad=True, persistent=True)
        b = g.tensor([out], f"b{layer}", dtype, requires_grad=True, persistent=True)
        z = nt.ops.add_fiber(1.0, b, 1.0, nt.ops.gemm(w, h, f"z{layer}"), f"zb{layer}")
        h = nt.ops.gelu(z, f"a{layer}")
    h.mark_output()
    return g


def planning_seconds(graph, preset):
    """CPU seconds of build_plan + programs() (the plan is dropped afterwards)."""
    start = time.process_time()
    plan = nt.build_plan(graph, RANKS, nt.TilingStrategy.auto(target_tile_bytes=1 << 20),
                         preset)   # 1 MiB tiles, not sized by the task budget
    programs = plan.programs()
    seconds = time.process_time() - start
    assert len(programs) == RANKS
    if preset in ("ddp", "fsdp"):
        assert plan.tilings["x"].grid[1] >= RANKS
    return seconds


@pytest.mark.parametrize("preset", ["single", "ddp", "fsdp", "tp"])
def test_plan_48_layers_for_64_ranks_under_5_seconds(preset):
    graph = deep_mlp(width=1024, hidden=4096, batch=1024)   # 768 MiB of fp32 weights
    assert len(graph.ops()) == 144
    # best of up to three, as timeit takes the minimum: on a shared machine a busy
    # neighbour slows even this process's CPU time down (caches, clock), never up
    times = []
    while len(times) < 3 and (not times or min(times) >= 5.0):
        times.append(planning_seconds(graph, preset))
    assert min(times) < 5.0, f"{preset}: planning took {times} s of CPU"


def reference_mlp(graph, arrays):
    h = arrays["x"]
    for layer in range(LAYERS):
        h = gelu(arrays[f"w{layer}"] @ h + arrays[f"b{layer}"][:, None])
    return h


@pytest.mark.parametrize("preset", ["ddp", "fsdp", "tp"])
def test_narrow_48_layers_run_on_64_simulated_ranks(preset):
    graph = deep_mlp(width=4, hidden=8, batch=64, dtype="fp64")
    cg = nt.compile(graph, comm=nt.SimulatedWorld(RANKS), distribution=preset,
                    tiling=nt.TilingStrategy.auto(target_tile_bytes=1024))
    rng = np.random.default_rng(0)
    arrays = {tensor.name: rng.standard_normal(tensor.shape) / 2 for tensor in graph.tensors()
              if tensor.role in ("input", "parameter")}
    for name, array in arrays.items():
        cg.bind_data(name, array)
    cg.execute()
    np.testing.assert_allclose(cg.get_output(graph.tensors()[-1].name),
                               reference_mlp(graph, arrays), rtol=1e-9, atol=1e-9)
    assert not stat_problems(cg)
    assert sum(cg.get_stats(rank).flops_executed > 0 for rank in range(RANKS)) > RANKS // 2


def rank_planning_seconds(graph, preset, rank):
    """CPU seconds of build_plan + `rank`'s program derived alone."""
    start = time.process_time()
    plan = nt.build_plan(graph, RANKS, nt.TilingStrategy.auto(target_tile_bytes=1 << 20),
                         preset, rank=rank)
    plan.program(rank)
    return time.process_time() - start


@pytest.mark.parametrize("preset", ["fsdp"])
def test_one_rank_alone_plans_faster_than_all_ranks(preset):
    """What an MPI rank or a PlanningWorld does (one program) costs less than the
    all-ranks build a SimulatedWorld needs: measured 0.57-0.71 of it for FSDP on 64
    ranks. (DDP measured 0.72-0.89: too close to bound; the per-rank builder still
    walks every rank's tasks to take the same decisions, docs/benchmarks.md section 5.)"""
    graph = deep_mlp(width=1024, hidden=4096, batch=1024)
    alone = min(rank_planning_seconds(graph, preset, RANKS - 1) for _ in range(2))
    everyone = min(planning_seconds(graph, preset) for _ in range(2))
    assert alone < 0.9 * everyone, f"{preset}: rank alone {alone:.2f} s, all {everyone:.2f} s"
