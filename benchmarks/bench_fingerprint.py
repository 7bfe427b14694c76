"""Cost of the per-execute fingerprint check (runtime/consistency.py) on 2 ranks.

Graph: x on rank 0 -> y = relu(x) on rank 1 -> z = relu(y) on rank 0: two tiny
messages per execute, so the check's one allgather is as visible as it can be.
Each repeat times `--executes` executes with the check, then as many with it
switched off (interleaved, after a warm-up); rank 0 prints microseconds per execute.

    PYTHONPATH=. mpiexec -n 2 python benchmarks/bench_fingerprint.py
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from mpi4py import MPI

import nntile_spmd as nt


def compiled():
    g = nt.LogicalGraph("fingerprint")
    x = g.tensor([4, 6], "x", dtype="fp64", external=True)
    nt.ops.relu(nt.ops.relu(x, "y"), "z").mark_output()
    on = {rank: nt.TileDistribution.on_rank(rank) for rank in (0, 1)}
    cg = nt.compile(g, distribution={"x": on[0], "y": on[1], "z": on[0]})
    cg.bind_data("x", np.ones((4, 6)))
    return cg


def per_execute_us(cg, executes):
    MPI.COMM_WORLD.Barrier()
    start = time.perf_counter()
    for _ in range(executes):
        cg.execute()
    return (time.perf_counter() - start) / executes * 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--executes", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=8)
    args = parser.parse_args()
    cg = compiled()
    verify = cg.agreement.verify
    per_execute_us(cg, 200)                       # warm-up
    checked, unchecked = [], []
    for _ in range(args.repeat):
        cg.agreement.verify = verify
        checked.append(per_execute_us(cg, args.executes))
        cg.agreement.verify = lambda world, phases_key: None
        unchecked.append(per_execute_us(cg, args.executes))
    if MPI.COMM_WORLD.rank == 0:
        print(f"median us/execute: with fingerprint {statistics.median(checked):.1f}, "
              f"without {statistics.median(unchecked):.1f}")


if __name__ == "__main__":
    main()
