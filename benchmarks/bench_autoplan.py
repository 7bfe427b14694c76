"""nt.autoplan against measurement: is the candidate the search puts first, when run,
within 10 % of the fastest of all its candidates run one by one?

Launched under mpiexec on the ranks to plan for:

    mpiexec -n 2 python benchmarks/bench_autoplan.py --model mlp
    mpiexec -n 4 python benchmarks/bench_autoplan.py --model gpt2 [--machine machine.json]
    python benchmarks/bench_autoplan.py --scale 1024 --layers 4   # the search alone, 1 core

The models are the simulator's workloads (simulate/workloads.py: the MLP 784-1024-
1024-10 with batch 256, a 2-layer GPT-2 of width 128; fp32, AdamW). Without --machine
rank 0 calibrates quickly inside the job and every rank takes its model; the search
runs its trials (search/trials.py: the candidates the model cannot tell apart, a few
steps each; --no-trials: the prediction's order alone). Then every
candidate (or the first --limit) is compiled and timed: --rounds rounds, each running
every candidate for --steps executes after one warm-up; a candidate's time is the
median step of its fastest round (a step: the slowest rank's execute). The table
gives each candidate's prediction, measurement and prediction error at the
calibration's speed (predicted / measured - 1, no rescaling), the replay of the same
plan as if every rank had cores of its own ("own cores": the model's default, where
the job's ranks outnumber this machine's cores), the replay at the speed the kernels
ran while measured (a profiled execute after each candidate's timed ones,
simulate/speed.py; the machine's drift from its calibration apart) and its error, and
the verdict: measured time of the first candidate over the fastest measured, and the
same for the first by prediction alone (the choice without trials).

--scale N plans a GPT-2-XL-shaped graph (n_embd 1600, 25 heads, seq 1024, vocab 50257,
one sequence per rank, forward + loss + gradients, fp32, as bench_plan_rank.py builds
it) for N simulated ranks (a PlanningWorld) with that benchmark's tiling (auto tiling
of a 1,024-sequence batch cuts tasks small enough that one rank's program takes
minutes) and times the whole search in CPU seconds.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_plan_rank import fixed_tiling, gpt2_xl_model  # noqa: E402

import nntile_spmd as nt  # noqa: E402
from nntile_spmd.runtime.compile_steps import make_world  # noqa: E402
from nntile_spmd.search.machine import machine_for  # noqa: E402
from nntile_spmd.simulate import MachineModel, predict  # noqa: E402
from nntile_spmd.simulate.speed import kernel_speed, task_ratios  # noqa: E402
from nntile_spmd.simulate.workloads import WORKLOADS  # noqa: E402

GOAL = 1.10
# this rank's CPU seconds over wall seconds in its timed executes, per candidate and
# round: how much of a core the rank had (1 thread per rank: near 1 on a quiet machine)
CPU_SHARES = []


def time_candidate(cg, workload, world, steps, machine) -> tuple:
    """(median step seconds (the slowest rank's) of `steps` executes after a warm-up,
    the kernels' speed against `machine` in one profiled execute after them)."""
    rng = np.random.default_rng(0)
    times, cpu, wall = [], 0.0, 0.0
    for step in range(steps + 1):
        workload.bind_batch(cg, rng)
        world.agree(None, "the start of a timed step")      # all ranks start together
        start, start_cpu = time.perf_counter(), time.process_time()
        cg.execute()
        mine = time.perf_counter() - start
        if step:
            cpu, wall = cpu + time.process_time() - start_cpu, wall + mine
        seconds = max(world.agree(mine, "a step's time"))
        if step:
            times.append(seconds)
    CPU_SHARES.append(cpu / max(wall, 1e-9))
    cg.profiling = True            # recording events costs time per task: not in a timed step
    workload.bind_batch(cg, rng)
    cg.execute()
    cg.profiling = False
    ratios = task_ratios(cg.plan, machine, world.rank, cg.events[world.rank],
                         machine.threads_per_rank(world.size))
    speed = kernel_speed([r for part in world.agree(ratios, "task ratios") for r in part])
    return statistics.median(times), speed


def measure(args):
    world = make_world(None, None)
    workload = WORKLOADS[args.model]()
    load = os.getloadavg()[0]
    started = time.process_time()
    machine = machine_for(world, MachineModel.load(args.machine) if args.machine else None)
    calibration_s = time.process_time() - started
    started, started_wall = time.process_time(), time.perf_counter()
    candidates = nt.autoplan(workload.graph, world, machine=machine,
                             trials=0 if args.no_trials else None)
    search_s = (time.process_time() - started, time.perf_counter() - started_wall)
    chosen = candidates[: args.limit or len(candidates)]
    best = {id(c): (float("inf"), 1.0) for c in chosen}     # (step s, kernel speed)
    compiled = {}
    for candidate in chosen:
        compiled[id(candidate)] = cg = nt.compile(candidate.graph, comm=world,
                                                  **candidate.compile_arguments())
        workload.bind_params(cg)
    for _ in range(args.rounds):     # rounds: a neighbour's burst hits one, not all
        for candidate in chosen:
            best[id(candidate)] = min(best[id(candidate)], time_candidate(
                compiled[id(candidate)], workload, world, args.steps, machine))
    if world.rank == 0:
        # the same plans replayed as if every rank had a core of its own (the model's
        # default), beside the core sharing detected on this machine
        own = dataclasses.replace(machine, core_sharing="own")
        own_cores = {id(c): predict(compiled[id(c)].plan, own).step_s for c in chosen}
        # and at the speed the kernels ran while measured (the machine's drift apart)
        at_speed = {id(c): predict(compiled[id(c)].plan,
                                   machine.at_speed(best[id(c)][1])).step_s for c in chosen}
        best = {key: seconds for key, (seconds, _) in best.items()}
        print(f"median CPU share of rank 0 in its executes: "
              f"{statistics.median(CPU_SHARES):.2f} of a core")
        print(f"load average {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end; "
              f"quick calibration {calibration_s:.1f} s of CPU: cores {machine.cores}, "
              f"core sharing {machine.core_sharing!r}, threads per rank "
              f"{machine.threads_per_rank(world.size)}")
        report(args, world.size, chosen, best, search_s, own_cores, at_speed)


def report(args, nranks, candidates, measured, search_s, own_cores, at_speed):
    trialled = [c for c in candidates if c.trial_step_s is not None]
    print(f"{args.model} on {nranks} rank(s): {len(candidates)} candidates measured, "
          f"search {search_s[0]:.1f} s of CPU, {search_s[1]:.1f} s of wall time "
          f"({len(trialled)} trials)")
    print(f"{'#':>3} {'candidate':<26} {'predicted ms':>12} {'trial ms':>9} "
          f"{'measured ms':>12} {'error':>7} {'own cores ms':>12} {'at speed ms':>11} "
          f"{'error':>7} {'peak KiB':>10}")
    for index, c in enumerate(candidates, 1):
        seconds = measured[id(c)]
        trial = "-" if c.trial_step_s is None else f"{c.trial_step_s * 1e3:.2f}"
        print(f"{index:>3} {c.label:<26} {c.predicted_step_s * 1e3:>12.2f} {trial:>9} "
              f"{seconds * 1e3:>12.2f} {c.predicted_step_s / seconds - 1:>+7.0%} "
              f"{own_cores[id(c)] * 1e3:>12.2f} {at_speed[id(c)] * 1e3:>11.2f} "
              f"{at_speed[id(c)] / seconds - 1:>+7.0%} {c.peak_bytes_per_rank / 1024:>10.1f}")
    fastest = min(candidates, key=lambda c: measured[id(c)])
    ratio = measured[id(candidates[0])] / measured[id(fastest)]
    predicted_first = min(candidates, key=lambda c: (c.predicted_step_s,
                                                     c.peak_bytes_per_rank, c.label))
    print(f"first by prediction alone {predicted_first.label}: "
          f"{measured[id(predicted_first)] * 1e3:.2f} ms, ratio "
          f"{measured[id(predicted_first)] / measured[id(fastest)]:.3f}")
    errors = [abs(c.predicted_step_s / measured[id(c)] - 1) for c in candidates]
    print(f"chosen {candidates[0].label}: {measured[id(candidates[0])] * 1e3:.2f} ms; "
          f"fastest measured {fastest.label}: {measured[id(fastest)] * 1e3:.2f} ms; "
          f"ratio {ratio:.3f} (goal <= {GOAL}: {'met' if ratio <= GOAL else 'NOT met'})")
    at_speed_errors = [abs(at_speed[id(c)] / measured[id(c)] - 1) for c in candidates]
    print(f"prediction error at the calibration's speed: chosen "
          f"{candidates[0].predicted_step_s / measured[id(candidates[0])] - 1:+.0%}, "
          f"median |error| over all {statistics.median(errors):.0%}; at the kernels' "
          f"speed of the run: median |error| {statistics.median(at_speed_errors):.0%}")


def scale(args):
    model = gpt2_xl_model(args.layers, args.scale)
    machine = MachineModel.load(args.machine) if args.machine else MachineModel(cores=1)
    started = time.process_time()
    candidates = nt.autoplan(model.graph, nt.PlanningWorld(args.scale),
                             memory_budget=args.budget, machine=machine,
                             log=lambda line: print(line, flush=True),
                             tilings=[fixed_tiling(args.tile_mib)])
    seconds = time.process_time() - started
    print(f"GPT-2-XL shape, {args.layers} layers, {args.scale} simulated ranks: "
          f"{len(candidates)} candidates in {seconds:.1f} s of CPU "
          f"(goal < 60 s: {'met' if seconds < 60 else 'NOT met'})")
    for index, c in enumerate(candidates[:8], 1):
        print(f"{index:>3} {c.label:<26} predicted {c.predicted_step_s:.3f} s, peak "
              f"{c.peak_bytes_per_rank / 2**30:.2f} GiB on the worst of ranks "
              f"{sorted(c.peaks)}, sent {c.bytes_sent_per_rank / 2**30:.2f} GiB")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=sorted(WORKLOADS), default="mlp")
    parser.add_argument("--machine", default=None, help="machine file (default: calibrate)")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--limit", type=int, default=0, help="measure the first N only")
    parser.add_argument("--no-trials", action="store_true",
                        help="autoplan(trials=0): the order is the prediction's")
    parser.add_argument("--scale", type=int, default=0, metavar="N",
                        help="time the search alone for a GPT-2-XL shape on N ranks")
    parser.add_argument("--layers", type=int, default=4, help="with --scale")
    parser.add_argument("--budget", type=int, default=None, help="with --scale: bytes/rank")
    parser.add_argument("--tile-mib", type=int, default=64, help="with --scale: the tiling "
                        "of bench_plan_rank.py (a sequence per tile, 4096-wide vocabulary "
                        "tiles, auto tiles of this size)")
    args = parser.parse_args()
    scale(args) if args.scale else measure(args)


if __name__ == "__main__":
    main()
