"""Simulator: what a core switch costs a rank, measured on two ranks of GPT-2.

    mpiexec -bind-to core -n 2 python -m nntile_spmd.simulate.shared_core OUT [PAIRS]

Both ranks run the calibration's GPT-2 step under DDP with profiling on, every
other execute with both bound to rank 0's core (pingpong.on_one_core), and OUT gets
rank 0's median CPU time of its tasks per execute on a core of its own and on the
shared one: rank 0 stays on its core, so the difference is not one core running
faster than the other. On the shared core the same tasks take more CPU time: after
the other rank computed there, a rank's tiles are no longer in the core's caches.
Executes alternate, because the machine's own speed drifts by more than the effect
between launches (docs/benchmarks.md, "Measurements behind code constants"). The
GPT-2, not the MLP: its small tiles stay in a core's caches, the MLP's stream from
memory anyway. `switch_penalty` divides the median difference of a few launches by the
turns the replay of the same step on one core begins after the other rank's work
(turns.CoreScheduler.switches): MachineModel.switch_penalty_s.
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import sys

import numpy as np

from .workloads import gpt2_workload

PAIRS = 30
LAUNCHES = 3
PRESET = "ddp"


def kernel_cpu_seconds(pairs=PAIRS) -> tuple:
    """Median CPU seconds of this rank's tasks per execute, (on its own core, on rank
    0's core with the other rank) in alternate executes (collective)."""
    from ..runtime import compile as compile_graph
    from .pingpong import on_one_core
    workload = gpt2_workload()
    cg = compile_graph(workload.graph, distribution=PRESET, task_threads=1)
    workload.bind_params(cg)
    rng = np.random.default_rng(0)
    for _ in range(2):                      # warm-up: numba, first touch, spare buffers
        workload.bind_batch(cg, rng)
        cg.execute()
    cg.profiling = True

    def tasks_cpu():
        workload.bind_batch(cg, rng)
        cg.execute()
        return sum(event.cpu_s for event in cg.events[cg.world.rank]
                   if event.kind == "task")

    own, shared = [], []
    for _ in range(pairs):
        own.append(tasks_cpu())
        with on_one_core(cg.world.comm):
            shared.append(tasks_cpu())
    return statistics.median(own), statistics.median(shared)


def replayed_switches(machine) -> float:
    """Turns per rank and execute that the replay of the same step, both ranks on
    one core of `machine`, begins after the other rank's work."""
    from ..runtime import compile as compile_graph
    from ..runtime.simulated import SimulatedWorld
    from .replay import Replay
    plan = compile_graph(gpt2_workload().graph, comm=SimulatedWorld(2), distribution=PRESET,
                         task_threads=1).plan
    one_core = dataclasses.replace(machine, cores=1, switch_penalty_s=0.0,
                                   core_sharing="bound", poll_s=float("inf"))
    replay = Replay(plan, one_core, None, None)
    replay.run()
    if replay.turns is None:                # no scheduler turn measured: no switches
        return 0.0
    return sum(replay.turns.switches.values()) / plan.nranks


def extra_cpu_seconds(pairs=PAIRS) -> float:
    """One launch of `pairs` alternate executes: rank 0's tasks' CPU time per execute
    on a shared core less on its own."""
    from .calibrate import run_on_two_ranks
    own, shared = run_on_two_ranks("nntile_spmd.simulate.shared_core", pairs,
                                   binding=("-bind-to", "core"))
    return shared - own


def switch_penalty(machine, launches=LAUNCHES, pairs=PAIRS) -> float:
    """CPU seconds a rank loses when it gets a shared core back after the other
    rank's work, the median of `launches` of `pairs` alternate executes each (0.0
    where two ranks cannot have a core each, or be bound to one)."""
    if not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2:
        return 0.0
    extra = statistics.median(extra_cpu_seconds(pairs) for _ in range(launches))
    switches = replayed_switches(machine)
    return max(0.0, extra / switches) if switches else 0.0


def main():
    from mpi4py import MPI
    own, shared = kernel_cpu_seconds(int(sys.argv[2]) if len(sys.argv) > 2 else PAIRS)
    if MPI.COMM_WORLD.rank == 0:
        with open(sys.argv[1], "w") as out:
            out.write(f"{own} {shared}\n")


if __name__ == "__main__":
    main()
