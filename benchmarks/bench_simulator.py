"""Predicted vs measured step time: does the simulator earn its users' trust?

For the MLP (784-1024-1024-10, batch 256) and a small GPT-2 (2 layers, n_embd 128,
4 heads, batch 4, seq 64), AdamW, fp32, under every preset on 1-4 ranks of this
machine: the slowest rank's executor time per execute, as the median over --steps
executes (after a warm-up) in each of --rounds rounds over all configurations, the
fastest round kept (the spread between rounds is printed: it is how much the machine
itself moved), next to the simulator's prediction for the same plan from the
machine file written by `python -m nntile_spmd.calibrate`, and next to the same
replay at the speed the machine ran the kernels meanwhile: a profiled execute
follows each timed one, and the median over all ranks' tasks of measured over
calibrated kernel time (simulate/speed.py) gives the machine file of that moment
(MachineModel.at_speed). A shared machine drifts from its calibration (up to 2x
within minutes here, docs/benchmarks.md#the-simulator): that column tells the model's
own error from the drift. Ranks beyond the cores share them, and the simulator is
told so (machine cores vs ranks on the node); they are bound to cores (`mpiexec
-bind-to core`: rank r on core r mod cores), the placement the replay models, since
where the scheduler puts unbound ranks moved a step by up to 80 % between rounds of
one run.

    python -m nntile_spmd.calibrate --shared-cores --out machine.json
    python benchmarks/bench_simulator.py --machine machine.json        # launches mpiexec

One configuration by hand (what the script runs):

    mpiexec -bind-to core -n 3 python benchmarks/bench_simulator.py --worker --machine machine.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import time

PRESETS = ("single", "ddp", "fsdp", "tp")


def worker(args):
    import numpy as np
    from mpi4py import MPI

    import nntile_spmd as nt
    from nntile_spmd.simulate import MachineModel, predict
    from nntile_spmd.simulate.speed import kernel_speed, task_ratios
    from nntile_spmd.simulate.workloads import WORKLOADS

    comm = MPI.COMM_WORLD
    # ranks beyond the cores are bound to them (main), and the closing collective is
    # mpi4py's blocking allreduce, which polls throughout
    machine = MachineModel.load(args.machine)
    machine = dataclasses.replace(machine, poll_s=float("inf"), core_sharing=(
        "bound" if comm.size > machine.cores else "own"))
    configs = []
    for model in args.models:
        workload = WORKLOADS[model]()
        for preset in args.presets:
            # the serial executor, as the replay models it (the automatic choice may
            # switch to task threads when it sees other processes on the cores)
            cg = nt.compile(workload.graph, distribution=preset, task_threads=1)
            workload.bind_params(cg)
            configs.append((model, preset, workload, cg, np.random.default_rng(0)))
    threads = machine.threads_per_rank(comm.size)

    def measure_round(cg, workload, rng):
        """(median step s of the slowest rank, kernel speed): each timed execute is
        followed by a profiled one (recording events costs time per task, kept out of
        the timed ones), whose tasks give how much slower than calibrated the kernels
        ran meanwhile."""
        steps, ratios = [], []
        workload.bind_batch(cg, rng)
        cg.execute()                             # warm-up
        for _ in range(args.steps):
            for profiled in (False, True):
                cg.profiling = profiled
                workload.bind_batch(cg, rng)
                cg.execute()
                if profiled:
                    ratios += task_ratios(cg.plan, machine, comm.rank,
                                          cg.events[comm.rank], threads)
                else:
                    steps.append(comm.allreduce(cg.get_stats().execution_time_ms,
                                                op=MPI.MAX) / 1e3)
        cg.profiling = False
        speed = kernel_speed([ratio for part in comm.allgather(ratios) for ratio in part])
        return statistics.median(steps), speed

    # Rounds over all configurations, so a slow spell of the machine (a neighbour's
    # load on the host) lands on one round of every configuration, not on all of one.
    rounds = [[] for _ in configs]       # per configuration: (median step s, kernel speed)
    for _ in range(args.rounds):
        for (_, _, workload, cg, rng), kept in zip(configs, rounds):
            kept.append(measure_round(cg, workload, rng))
    if comm.rank != 0:
        return
    for (model, preset, _, cg, _), kept in zip(configs, rounds):
        print(f"# {model} {preset} {comm.size} rank(s): round medians (ms), kernel speed "
              f"{[(round(t * 1e3, 2), round(speed, 2)) for t, speed in kept]}",
              file=sys.stderr, flush=True)
        measured, speed = min(kept)
        predicted = predict(cg.plan, machine).step_s
        at_speed = predict(cg.plan, machine.at_speed(speed)).step_s
        print(json.dumps({"model": model, "preset": preset, "ranks": comm.size,
                          "measured_ms": round(measured * 1e3, 2),
                          "spread": round(max(t for t, _ in kept) / measured - 1, 3),
                          "predicted_ms": round(predicted * 1e3, 2),
                          "error": round(predicted / measured - 1, 3),
                          "kernel_speed": round(speed, 3),
                          "at_speed_ms": round(at_speed * 1e3, 2),
                          "at_speed_error": round(at_speed / measured - 1, 3)}), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worker", action="store_true")
    parser.add_argument("--machine", default="machine.json")
    parser.add_argument("--ranks", type=int, nargs="+", default=[1, 2, 3, 4])
    parser.add_argument("--models", nargs="+", default=["mlp", "gpt2"])
    parser.add_argument("--presets", nargs="+", default=list(PRESETS))
    parser.add_argument("--steps", type=int, default=10, help="executes per round")
    parser.add_argument("--rounds", type=int, default=3,
                        help="rounds over all configurations; the fastest median is kept")
    args = parser.parse_args()
    if args.worker:
        return worker(args)
    mpiexec = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    cores = len(os.sched_getaffinity(0))
    rows = []
    for ranks in args.ranks:
        binding = ["-bind-to", "core"] if ranks > cores else []
        command = [mpiexec, *binding, "-n", str(ranks), sys.executable, __file__, "--worker",
                   "--machine", args.machine, "--steps", str(args.steps),
                   "--rounds", str(args.rounds),
                   "--models", *args.models, "--presets", *args.presets]
        started = time.perf_counter()
        output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
        rows += [json.loads(line) for line in output.splitlines() if line.startswith("{")]
        print(f"# {ranks} rank(s) measured in {time.perf_counter() - started:.0f} s",
              file=sys.stderr)
    print("| model | preset | ranks | measured ms | rounds' spread | predicted ms | error | "
          "kernels' speed | predicted at it, ms | error at it |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        print(f"| {row['model']} | {row['preset']} | {row['ranks']} | {row['measured_ms']} | "
              f"{row['spread']:.0%} | {row['predicted_ms']} | {row['error']:+.0%} | "
              f"{row['kernel_speed']:.2f}x | {row['at_speed_ms']} | "
              f"{row['at_speed_error']:+.0%} |")
    summarize("calibrated speed: ", [row["error"] for row in rows])
    summarize("at the kernels' speed of the run: ", [row["at_speed_error"] for row in rows])


def summarize(what, errors):
    errors = [abs(error) for error in errors]
    if errors:
        print(f"{what}{sum(error <= 0.2 for error in errors)} of {len(errors)} within 20 %; "
              f"median |error| {statistics.median(errors):.0%}, worst {max(errors):.0%}")


if __name__ == "__main__":
    main()
