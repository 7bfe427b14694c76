"""Activation recomputation: peak memory and FLOPs with and without it, planned and measured.

A byte-level GPT-2 training step (forward, backward, AdamW) built twice, without and
with `recompute=True` (every block keeps only its input; backward runs the block's
forward again), on --ranks simulated ranks under each --preset. One execute each;
"measured" peak is the tile store's tracking allocator (cg.get_stats), FLOPs are the
executor's count; recompute FLOPs are those of the copies (plan.recompute_flops);
time is the second of two executes (optimizer steps), median of --repeat alternated
runs. The two runs' loss and gradients after them are compared bitwise.

    python benchmarks/bench_recompute.py [--layers 6 --embd 256 --heads 4 --seq 128
                                          --batch 8 --ranks 1 --preset single
                                          --repeat 1]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import nntile_spmd as nt
from nntile_spmd.models import gpt2
from nntile_spmd.train import add_optimizer


def step(args, preset, recompute):
    config = gpt2.GPT2Config(vocab_size=256, n_positions=args.seq, n_embd=args.embd,
                             n_layer=args.layers, n_head=args.heads)
    model = gpt2.build_gpt2(config, batch=args.batch, seq=args.seq, dtype="fp32",
                            recompute=recompute)
    add_optimizer(model.graph, model.params, model.grads, "adamw", lr=1e-3)
    cg = nt.compile(model.graph, comm=nt.SimulatedWorld(args.ranks), distribution=preset)
    for name, value in model.init_params(np.random.default_rng(0)).items():
        cg.bind_data(name, value)
    rng = np.random.default_rng(1)
    for name in ("input_ids", "targets"):
        cg.bind_data(name, np.asfortranarray(rng.integers(0, 256, (args.seq, args.batch))))
    cg.execute()   # the first execute also compiles the Numba kernels: not timed
    cg.wait()
    start = time.perf_counter()
    cg.execute()
    cg.wait()
    seconds = time.perf_counter() - start
    cg.check_stats()   # measured peak bytes, traffic and FLOPs equal the plan's
    ranks = range(args.ranks)
    return {"planned": [cg.plan.peak_bytes(r) for r in ranks],
            "measured": [cg.get_stats(r).peak_bytes for r in ranks],
            "flops": sum(cg.get_stats(r).flops_executed for r in ranks),
            "extra": cg.plan.recompute_flops(), "seconds": seconds,
            "values": [cg.get_output("loss")] + [cg.get_output(g.name) for g in model.grads]}


def mib(values) -> str:
    return " ".join(f"{v / 2**20:.1f}" for v in values)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--embd", type=int, default=256)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--ranks", type=int, default=1)
    parser.add_argument("--preset", nargs="+", default=["single"])
    parser.add_argument("--repeat", type=int, default=1, help="alternated runs; median time")
    args = parser.parse_args()
    print(f"GPT-2 {args.layers} layers, n_embd {args.embd}, {args.heads} heads, seq "
          f"{args.seq}, batch {args.batch}, fp32, AdamW; {args.ranks} simulated rank(s)")
    print(f"{'preset':8s} {'recompute':9s} {'peak MiB/rank planned':>22s} "
          f"{'measured':>18s} {'GFLOP':>7s} {'of which recompute':>19s} {'s/step':>7s}")
    for preset in args.preset:
        runs, seconds = {}, {False: [], True: []}
        for _ in range(args.repeat):   # alternated, so both see the same machine load
            for flag in (True, False):
                runs[flag] = step(args, preset, flag)
                seconds[flag].append(runs[flag]["seconds"])
        for flag in (False, True):
            run = runs[flag]
            run["seconds"] = statistics.median(seconds[flag])
            print(f"{preset:8s} {str(flag):9s} {mib(run['planned']):>22s} "
                  f"{mib(run['measured']):>18s} {run['flops'] / 1e9:7.2f} "
                  f"{run['extra'] / 1e9:12.2f} ({100 * run['extra'] / run['flops']:4.1f}%)"
                  f" {run['seconds']:7.2f}")
        same = all(np.array_equal(a, b) for a, b in zip(runs[False]["values"],
                                                        runs[True]["values"]))
        drop = 1 - max(runs[True]["planned"]) / max(runs[False]["planned"])
        print(f"  peak drop {100 * drop:.1f}% (largest rank); loss and gradients bitwise "
              f"equal: {same}")


if __name__ == "__main__":
    main()
