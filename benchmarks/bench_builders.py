"""The all-ranks view of a plan built once, or derived rank by rank.

A SimulatedWorld runs every rank's program in one process, so its plan needs all of
them; an MPI rank or a PlanningWorld needs its own only. The project keeps two
entries into the one builder: `Plan.programs()` walks every task group once and
writes every rank's program (ProgramBuilder), `Plan.rank_program(r)` walks the groups
rank r takes part in (RankProgramBuilder, a subclass). Deriving the all-ranks view
rank by rank instead would leave one walk, at the cost this script measures: for
each world size, CPU seconds of `build_plan(...).programs()` against
`build_plan(...)` then `rank_program(r)` for every rank, on one plan object (tiling,
owners and tile tables shared), and checks both give the same programs.

The graph: a GPT-2 with AdamW (vocab 256, 4 layers, n_embd 256, 4 heads, batch 8,
seq 128), fp32, auto tiling; presets ddp, fsdp and tp. Times are CPU seconds of this
process (time.process_time), best of --repeats; "others" is the share of all cores
other processes used meanwhile.

Command (from the repository root):

    PYTHONPATH=. python benchmarks/bench_builders.py
    PYTHONPATH=. python benchmarks/bench_builders.py --ranks 2 4 16 --presets fsdp
"""

from __future__ import annotations

import argparse
import time

from _common import CpuLoad, wait_for_quiet

import nntile_spmd as nt
from nntile_spmd.models import gpt2
from nntile_spmd.train import add_optimizer


def gpt2_graph():
    cfg = gpt2.GPT2Config(vocab_size=256, n_positions=128, n_embd=256, n_layer=4, n_head=4)
    model = gpt2.build_gpt2(cfg, batch=8, seq=128)
    add_optimizer(model.graph, model.params, model.grads, "adamw")
    return model.graph


def plan_for(graph, ranks, preset):
    return nt.build_plan(graph, ranks, nt.TilingStrategy.auto(), preset)


def all_ranks(graph, ranks, preset):
    start = time.process_time()
    programs = plan_for(graph, ranks, preset).programs()
    return time.process_time() - start, programs


def rank_by_rank(graph, ranks, preset):
    start = time.process_time()
    plan = plan_for(graph, ranks, preset)
    programs = [plan.rank_program(rank) for rank in range(ranks)]
    return time.process_time() - start, programs


def best(measure, repeats):
    with CpuLoad() as load:
        runs = [measure() for _ in range(repeats)]
    return min(seconds for seconds, _ in runs), runs[0][1], load.others()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=[1, 2, 3, 4, 8, 16])
    parser.add_argument("--presets", nargs="+", default=["ddp", "fsdp", "tp"])
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    graph = gpt2_graph()
    all_ranks(graph, 1, "ddp")   # imports and first-call caches, outside the timings
    wait_for_quiet()
    print(f"GPT-2 + AdamW, {len(graph.ops())} ops; CPU s, best of {args.repeats}")
    print(f"{'preset':>6} {'ranks':>5} {'all ranks':>10} {'rank by rank':>13} {'ratio':>6} "
          f"{'others':>7}")
    for preset in args.presets:
        for ranks in args.ranks:
            once, programs, load_once = best(lambda r=ranks, p=preset: all_ranks(graph, r, p),
                                             args.repeats)
            each, derived, load_each = best(lambda r=ranks, p=preset: rank_by_rank(graph, r, p),
                                            args.repeats)
            if derived != programs:
                raise SystemExit(f"{preset}, {ranks} ranks: the programs differ")
            print(f"{preset:>6} {ranks:>5} {once:>10.2f} {each:>13.2f} {each / once:>6.2f} "
                  f"{max(load_once, load_each):>6.0%}", flush=True)


if __name__ == "__main__":
    main()
