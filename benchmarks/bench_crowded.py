"""More ranks than cores: park a tile with unfinished sends at once, or poll 1 ms?

On a node whose ranks outnumber its cores the runtime parks such a tile at once
(runtime/executor.py, CROWDED_SEND_GRACE_SECONDS); elsewhere it polls the sends for
SEND_GRACE_SECONDS first. This runs the simulator's workloads (the MLP and a small
GPT-2, AdamW, fp32) on the same compiled graphs in alternating rounds with each
setting and prints the median step (the slowest rank's executor clock) of each.

    mpiexec -bind-to core -n 3 python benchmarks/bench_crowded.py
"""

from __future__ import annotations

import argparse
import statistics

import numpy as np
from mpi4py import MPI

import nntile_spmd as nt
from _common import median_step_ms
from nntile_spmd.runtime.executor import CROWDED_SEND_GRACE_SECONDS, SEND_GRACE_SECONDS
from nntile_spmd.simulate.workloads import WORKLOADS

SETTINGS = {"parked at once": CROWDED_SEND_GRACE_SECONDS, "polled first": SEND_GRACE_SECONDS}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=["gpt2", "mlp"])
    parser.add_argument("--presets", nargs="+", default=["fsdp", "tp", "ddp"])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args()
    comm = MPI.COMM_WORLD
    for model in args.models:
        workload = WORKLOADS[model]()
        for preset in args.presets:
            cg = nt.compile(workload.graph, distribution=preset, task_threads=1)
            workload.bind_params(cg)
            rng, kept = np.random.default_rng(0), {name: [] for name in SETTINGS}
            for round_ in range(args.rounds):
                name = list(SETTINGS)[round_ % len(SETTINGS)]
                cg.world.send_grace_s = SETTINGS[name]
                kept[name].append(median_step_ms(cg, workload, rng, args.steps, comm))
            if comm.rank == 0:
                at_once, polled = (statistics.median(kept[name]) for name in SETTINGS)
                print(f"{model} {preset} on {comm.size} ranks: parked at once {at_once:.2f} "
                      f"ms, polled first {polled:.2f} ms, ratio {at_once / polled:.2f}",
                      flush=True)


if __name__ == "__main__":
    main()
