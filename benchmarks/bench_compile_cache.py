"""Compile time with and without the plan cache.

GPT-2 of the performance issue (vocab 256, 6 layers, n_embd 384, 6 heads, batch 8,
seq 256) with AdamW under FSDP, planned for --ranks simulated ranks (every rank's
program, as a SimulatedWorld needs): the first compile plans; a second compile of
an equal graph (built again) is a hit in memory; a third through a new PlanCache on
the same directory stands for a restarted job and reads the plan from disk.

    python benchmarks/bench_compile_cache.py [--ranks 4] [--layers 6]
"""

from __future__ import annotations

import argparse
import tempfile
import time

import nntile_spmd as nt
from nntile_spmd.simulate.workloads import gpt2_workload


def timed_compile(args, cache):
    graph = gpt2_workload(n_layer=args.layers, n_embd=384, n_head=6, batch=8, seq=256).graph
    start = time.perf_counter()
    nt.compile(graph, comm=nt.SimulatedWorld(args.ranks), distribution="fsdp", cache=cache)
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--layers", type=int, default=6)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        cache = nt.PlanCache(directory)
        uncached = timed_compile(args, None)
        first = timed_compile(args, cache)
        memory = timed_compile(args, cache)
        restarted = nt.PlanCache(directory)
        disk = timed_compile(args, restarted)
    print(f"GPT-2 {args.layers} layers, fsdp, {args.ranks} simulated ranks")
    print(f"  compile without cache:      {uncached * 1e3:8.1f} ms")
    print(f"  first compile (miss+store): {first * 1e3:8.1f} ms")
    print(f"  second compile (memory):    {memory * 1e3:8.1f} ms  "
          f"{uncached / memory:6.1f}x faster")
    print(f"  restarted job (disk):       {disk * 1e3:8.1f} ms  "
          f"{uncached / disk:6.1f}x faster")
    print(f"  cache stats: {cache.stats}; restarted: {restarted.stats}")


if __name__ == "__main__":
    main()
