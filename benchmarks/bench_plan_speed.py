"""Planning speed: a 48-layer MLP (1024 <-> 4096, 1 MiB auto tiles) for 64 ranks.

For each preset: CPU seconds of the all-ranks build (`build_plan` + `programs()`,
what a SimulatedWorld runs) against the goal of 5 s, then, for FSDP, the last rank
planned alone (what an MPI rank or a PlanningWorld does) as a fraction of the
all-ranks build. Times are the best of --repeats runs of this process's CPU time
(time.process_time: planning is single-threaded Python, and on a shared machine
wall time would count the neighbours too); "others" is the share of all cores
other processes used meanwhile, so a contaminated row says so.

Command (from the repository root):

    PYTHONPATH=. python benchmarks/bench_plan_speed.py
"""

from __future__ import annotations

import argparse
import time

from _common import CpuLoad, wait_for_quiet

import nntile_spmd as nt
from nntile_spmd.models import build_mlp

LAYERS, RANKS, GOAL_S = 48, 64, 5.0


def deep_mlp():
    """48 layers alternately 1024 -> 4096 and 4096 -> 1024 (gemm, bias add, gelu each),
    a batch of 1024 and the loss, forward only (768 MiB of fp32 weights)."""
    return build_mlp((1024, 4096) * (LAYERS // 2) + (1024,), 1024, with_grads=False).graph


def all_ranks_seconds(graph, preset):
    start = time.process_time()
    tiling = nt.TilingStrategy.auto(target_tile_bytes=1 << 20)   # not sized by tasks
    programs = nt.build_plan(graph, RANKS, tiling, preset).programs()
    assert len(programs) == RANKS
    return time.process_time() - start


def one_rank_seconds(graph, preset, rank):
    start = time.process_time()
    tiling = nt.TilingStrategy.auto(target_tile_bytes=1 << 20)
    nt.build_plan(graph, RANKS, tiling, preset, rank=rank).program(rank)
    return time.process_time() - start


def best(measure, repeats):
    with CpuLoad() as load:
        seconds = min(measure() for _ in range(repeats))
    return seconds, load.others()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", nargs="+", default=["single", "ddp", "fsdp", "tp"])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    graph = deep_mlp()
    wait_for_quiet()
    print(f"48-layer MLP, {len(graph.ops())} ops, {RANKS} ranks, 1 MiB auto tiles; "
          f"CPU s, best of {args.repeats}")
    print(f"{'preset':>8} {'all ranks s':>12} {'goal':>6} {'others':>7}")
    for preset in args.presets:
        seconds, others = best(lambda p=preset: all_ranks_seconds(graph, p), args.repeats)
        verdict = "ok" if seconds < GOAL_S else "OVER"
        print(f"{preset:>8} {seconds:>12.2f} {verdict:>6} {others:>6.0%}", flush=True)
    everyone, _ = best(lambda: all_ranks_seconds(graph, "fsdp"), args.repeats)
    alone, others = best(lambda: one_rank_seconds(graph, "fsdp", RANKS - 1), args.repeats)
    print(f"fsdp, rank {RANKS - 1} alone: {alone:.2f} s = {alone / everyone:.2f} of the "
          f"all-ranks build ({others:.0%} others)")


if __name__ == "__main__":
    main()
