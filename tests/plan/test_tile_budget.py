"""The default auto tiling is sized by the tasks it makes per rank (plan/tile_budget.py):
starting from 1 MiB, its target doubles while the estimated tasks per rank exceed the
budget; an explicit target is kept; the split axis counts per rank, so the other axes are
cut alike at every world size; dump_plan() says why. Plain pytest."""

import pytest

import nntile_spmd as nt
from nntile_spmd.plan import tile_budget

pytestmark = pytest.mark.mpi_skip


def layer(batch=64):
    """One gemm with 4 MiB of fp32 weight and a batch axis: 1 MiB tiles cut it."""
    g = nt.LogicalGraph("layer")
    x = g.tensor([1024, batch], "x", external=True)                    # (features, batch)
    w = g.tensor([1024, 1024], "w", requires_grad=True, persistent=True)
    nt.ops.gemm(w, x, "y").mark_output()
    return g


def test_the_target_doubles_until_the_tasks_fit(monkeypatch):
    monkeypatch.setattr(tile_budget, "TASK_BUDGET", 1)   # one gemm task
    plan = nt.build_plan(layer(), 1, nt.TilingStrategy.auto(), "single")
    assert plan.tilings["w"].grid == (1, 1)   # 4 MiB: whole at the doubled target
    assert plan.tiling_notes[0].startswith("auto target 4 MiB: 1 MiB tiles gave")
    kept = nt.build_plan(layer(), 1, nt.TilingStrategy.auto(target_tile_bytes=1 << 20))
    assert kept.tilings["w"].grid != (1, 1) and "(given)" in kept.tiling_notes[0]


def test_small_graphs_keep_their_tiles():
    plan = nt.build_plan(layer(), 1, nt.TilingStrategy.auto(), "single")
    given = nt.build_plan(layer(), 1, nt.TilingStrategy.auto(target_tile_bytes=1 << 20))
    assert plan.tilings == given.tilings
    assert "within the budget" in plan.tiling_notes[0]


def test_the_split_axis_counts_per_rank():
    """One sample per rank: the weight's tiles do not shrink as the world grows."""
    grids = {ranks: nt.build_plan(layer(batch=ranks * 256), ranks, nt.TilingStrategy.auto(),
                                  "fsdp").tilings["w"].grid for ranks in (1, 4, 16)}
    assert len(set(grids.values())) == 1, grids


def test_dump_plan_says_why_each_axis_is_cut():
    cg = nt.compile(layer(), comm=nt.SimulatedWorld(2), distribution="ddp")
    text = cg.dump_plan()
    tiling = text.split("tiling:\n", 1)[1].split("tensors:", 1)[0]
    assert "auto target 1 MiB" in tiling
    assert "split over the 2 rank(s)" in tiling and "halved to bring" in tiling
