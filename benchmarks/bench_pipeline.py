"""Pipeline bubble: measured on real MPI ranks vs the GPipe formula (p-1)/(m+p-1).

An MLP of --layers equal layers (width --width, fp32, forward and backward) under
pipeline parallelism on the ranks of an MPI world (one stage per rank, equal layers
per stage), GPipe and 1F1B (--schedules), its batch of --batch samples cut into m
micro-batches (the batch tiles) for each m of --micro-batches. For each m, after
one warm-up execute, `cg.profile()` records --repeat executes. A rank's bubble is
the part of the step (the longest rank's executor wall time) it was not working:
waiting for messages (or tasks) or already done. The table gives the mean over
ranks (median of the repeats) next to the formula and to the simulator's
prediction (nntile_spmd.simulate replaying the same programs on its machine model:
idle over finish time per rank, mean). The executor's own per-task work counts as
busy, not as bubble. Every rank's measured traffic, FLOPs and peak bytes are set
against the plan's: a peak above the plan means the executor parked a sent tile's
buffer at its FREE because the receiving stage, idle in the bubble, was sleeping
between polls for longer than the executor's send grace (runtime/executor.py,
SEND_GRACE_SECONDS).

    mpiexec -n 2 python benchmarks/bench_pipeline.py [--layers 4 --width 512
        --batch 256 --micro-batches 1 2 4 8 --repeat 3 --schedules gpipe 1f1b]

On a shared 2-core machine other processes' work shows up as wait: run it when the
machine is quiet (the table prints how busy the cores were meanwhile).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import CpuLoad  # noqa: E402

import nntile_spmd as nt  # noqa: E402
from nntile_spmd.models import build_mlp  # noqa: E402
from nntile_spmd.simulate import MachineModel, predict  # noqa: E402


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=4, help="a multiple of the ranks")
    parser.add_argument("--width", type=int, default=512)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--micro-batches", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--schedules", nargs="+", default=["gpipe", "1f1b"],
                        choices=["gpipe", "1f1b"])
    return parser.parse_args(argv)


def bubble(args, comm, schedule, micro_batches, trace_path):
    """(measured bubbles per repeat, simulator's bubble) for one micro-batch count."""
    sizes = [args.width] * (args.layers + 1)
    model = build_mlp(sizes, args.batch, dtype="fp32")
    tiling = nt.TilingStrategy.manual({"x": [args.width, args.batch // micro_batches]})
    cg = nt.compile(model.graph, comm=comm, tiling=tiling,
                    distribution={"pp": comm.size, "schedule": schedule})
    rng = np.random.default_rng(0)
    for name, value in model.init_params(rng).items():
        cg.bind_data(name, value)
    cg.bind_data("x", np.asfortranarray(rng.standard_normal((args.width, args.batch)),
                                        dtype=np.float32))
    cg.bind_data("y", rng.integers(0, args.width, args.batch).astype(np.int64))
    cg.execute()   # warm-up: Numba compiles, buffers are first allocated
    cg.wait()
    measured = []
    for _ in range(args.repeat):
        rows = cg.profile(trace_path).ranks.values()
        step_ms = max(row["wall_ms"] for row in rows)
        measured.append(statistics.mean(
            1 - (row["wall_ms"] - row["recv_wait_ms"] - row["task_wait_ms"]) / step_ms
            for row in rows))
    versus = comm.allgather(cg.stats_vs_plan(comm.rank))
    predicted = predict(cg.plan, MachineModel())
    simulated = statistics.mean(idle / finish for idle, finish
                                in zip(predicted.idle_s, predicted.finish_s) if finish)
    return measured, simulated, versus


def main(argv=None):
    args = parse_args(argv)
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    stages = comm.size
    if args.layers % stages:
        raise SystemExit(f"--layers {args.layers} is not a multiple of the {stages} ranks")
    trace_path = os.path.join(tempfile.gettempdir(), f"bench_pipeline_{os.getpid()}.json")
    rows = []
    with CpuLoad() as load:
        for schedule in args.schedules:
            for m in args.micro_batches:
                measured, simulated, versus = bubble(args, comm, schedule, m, trace_path)
                rows.append((schedule, m, statistics.median(measured), min(measured),
                             simulated, (stages - 1) / (m + stages - 1), versus))
    own = comm.allreduce(load.own)
    if comm.rank == 0:
        print(f"pp on {stages} ranks: MLP {args.layers} x {args.width} fp32, batch "
              f"{args.batch}, forward + backward; bubble = (step - work) / step per rank, "
              f"mean over ranks; median (min) of {args.repeat}")
        print(f"{'schedule':8s} {'m':>4s} {'measured':>9s} {'(min)':>7s} {'simulator':>9s} "
              f"{'(p-1)/(m+p-1)':>13s}  peak MiB per rank planned/measured")
        for schedule, m, median, low, simulated, formula, versus in rows:
            peaks = " ".join(f"{p / 2**20:.2f}/{q / 2**20:.2f}"
                             for p, q in (v["peak_bytes"] for v in versus))
            print(f"{schedule:8s} {m:4d} {median:9.3f} {low:7.3f} {simulated:9.3f} "
                  f"{formula:13.3f}  {peaks}")
        wrong = [f"{row[0]} m={row[1]} rank {rank} {name}: planned {p}, measured {q}"
                 for row in rows for rank, v in enumerate(row[6])
                 for name, (p, q) in v.items() if p != q]
        print("planned == measured (bytes sent and received, FLOPs, peak bytes), every "
              "rank: " + ("yes" if not wrong else "NO: " + "; ".join(wrong)))
        print(f"cores busy meanwhile: {load.busy:.0%}, of which other processes "
              f"{load.others(own):.0%}")


if __name__ == "__main__":
    main()
