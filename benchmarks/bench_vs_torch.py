"""MLP train-step time: ours vs PyTorch eager, same shapes, same threads, one run.

MLP 784-1024-1024-10 (GELU), batch 256, cross-entropy, AdamW, fp32. A
step is binding the batch, cg.execute() (forward, backward, AdamW) and reading the
loss for ours; zero_grad, forward, loss, backward, AdamW.step() and loss.item()
for PyTorch. Both start from the same weights.

Configurations, timed in alternation step by step (so a busy neighbour slows all
of them alike), best and median of --steps:

* 1 thread: PyTorch (torch.set_num_threads(1)) vs ours, one rank, serial executor,
  1 BLAS thread;
* 2 threads: PyTorch (set_num_threads(2)) vs ours, one rank with 2 task threads
  (BLAS 1 thread each), and one rank with the serial executor and 2 BLAS threads;
  then ours on 2 ranks x 1 thread (DDP, `python -m nntile_spmd.launch -n 2
  --threads 1`), started as a separate job after the others (not interleaved).

Printed: ms/step, ours/PyTorch time ratios (< 1: ours is faster), and one rank on
2 task threads vs one rank on 1 thread (target: >= 1.7x), and a bound
for the latter: the 1-thread step's measured task times replayed on 2 workers with
the threaded executor's dependencies and look-ahead (schedule_bound). PyTorch is
the optional `bench` extra (pip install -e '.[bench]').

    PYTHONPATH=. python benchmarks/bench_vs_torch.py
    PYTHONPATH=. python benchmarks/bench_vs_torch.py --steps 20 --tile 512 128
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

import nntile_spmd as nt
from nntile_spmd.models import mlp
from nntile_spmd.plan.instructions import Exec
from nntile_spmd.runtime.executor_threads import MAX_IN_FLIGHT_PER_THREAD
from nntile_spmd.train import add_optimizer

from _common import CpuLoad, wait_for_quiet

SIZES = (784, 1024, 1024, 10)
BATCH = 256


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=10, help="timed steps of each")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--tile", type=int, nargs=2, default=[512, 128],
                        metavar=("HIDDEN", "BATCH"),
                        help="tile of the hidden and batch axes (default 512 128)")
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--no-wait", action="store_true")
    parser.add_argument("--no-ddp", action="store_true", help="skip the 2-rank job")
    parser.add_argument("--ddp-worker", action="store_true", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def batch_data():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((SIZES[0], BATCH)).astype(np.float32)
    y = rng.integers(0, SIZES[-1], BATCH)
    params = mlp.init_linear_params(SIZES, np.random.default_rng(1), "fp32")
    return x, y, params


def make_ours(args, params, comm=None, distribution="single", threads=1, task_threads=1):
    model = mlp.build_mlp(SIZES, BATCH, "fp32")
    add_optimizer(model.graph, model.params, model.grads, "adamw", lr=args.lr,
                  weight_decay=0.01)
    hidden, batch = args.tile
    tiling = nt.TilingStrategy.manual({"w2": [hidden, hidden], "x": [SIZES[0], batch]})
    cg = nt.compile(model.graph, comm=comm, distribution=distribution, tiling=tiling,
                    threads=threads, task_threads=task_threads)
    for name, value in params.items():
        cg.bind_data(name, value)
    return cg, model.loss.name


def our_step(ours, x, y):
    cg, loss = ours
    start = time.perf_counter()
    cg.bind_data("x", x)
    cg.bind_data("y", y)
    cg.execute()
    value = float(cg.get_output(loss))
    return time.perf_counter() - start, value


def make_torch(args, params):
    import torch
    layers = []
    for layer in range(1, len(SIZES)):
        linear = torch.nn.Linear(SIZES[layer - 1], SIZES[layer])
        with torch.no_grad():
            linear.weight.copy_(torch.from_numpy(params[f"w{layer}"]))
            linear.bias.copy_(torch.from_numpy(params[f"b{layer}"]))
        layers += [linear, torch.nn.GELU()] if layer < len(SIZES) - 1 else [linear]
    model = torch.nn.Sequential(*layers)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    return model, optimizer


def torch_step(theirs, x, y):
    import torch
    model, optimizer = theirs
    start = time.perf_counter()
    optimizer.zero_grad(set_to_none=True)
    loss = torch.nn.functional.cross_entropy(model(torch.from_numpy(x.T)),
                                             torch.from_numpy(y))
    loss.backward()
    optimizer.step()
    value = loss.item()
    return time.perf_counter() - start, value


def schedule_bound(cg, threads, window=MAX_IN_FLIGHT_PER_THREAD):
    """Profile one serial execute of `cg`, then replay its EXECs as the threaded
    executor schedules them: issued in program order, at most `window` x `threads`
    issued and unfinished, each started on a free worker once the tasks it depends on
    (per tile: read after write, write after write and after read) have ended, with
    the measured task times. Returns (serial kernel ms, replayed ms): their ratio is
    the most `threads` task threads can gain on this program with these kernels,
    before any cost of threads, the interpreter lock or memory bandwidth."""
    import heapq
    profile = cg.profile(os.devnull)
    durations = [e["dur"] / 1e3 for e in profile.trace["traceEvents"] if e.get("cat") == "task"]
    execs = [i for i in cg.plan.program(0) if type(i) is Exec]
    successors = [[] for _ in execs]
    pending, writer, readers = [0] * len(execs), {}, {}
    for index, instruction in enumerate(execs):
        inputs = instruction.keys[:len(instruction.keys) - len(instruction.writes)]
        deps = {writer[key] for key in inputs if key in writer}
        for key in instruction.writes:
            deps.update(([writer[key]] if key in writer else []) + readers.get(key, []))
        pending[index] = len(deps)
        for dep in deps:
            successors[dep].append(index)
        for key in inputs:
            readers.setdefault(key, []).append(index)
        for key in instruction.writes:
            writer[key], readers[key] = index, []
    now, issued, in_flight, ready, running, idle = 0.0, 0, 0, [], [], threads
    issued_set = set()
    while issued < len(execs) or running or ready:
        while issued < len(execs) and in_flight < window * threads:
            issued_set.add(issued)
            in_flight += 1
            if not pending[issued]:
                ready.append(issued)
            issued += 1
        while ready and idle:
            task = ready.pop(0)
            heapq.heappush(running, (now + durations[task], task))
            idle -= 1
        now, task = heapq.heappop(running)
        idle, in_flight = idle + 1, in_flight - 1
        for successor in successors[task]:
            pending[successor] -= 1
            if not pending[successor] and successor in issued_set:
                ready.append(successor)
    return sum(durations), now


def ddp_worker(args):
    """One rank of the 2-rank job: prints its step times as JSON on rank 0."""
    x, y, params = batch_data()
    ours = make_ours(args, params, distribution="ddp", threads=1, task_threads=1)
    times = [our_step(ours, x, y)[0] for _ in range(args.warmup + args.steps)]
    if ours[0].world.rank == 0:
        print("TIMES " + json.dumps(times[args.warmup:]))


def run_ddp(args):
    command = [sys.executable, "-m", "nntile_spmd.launch", "-n", "2", "--threads", "1",
               os.path.abspath(__file__), "--ddp-worker", "--steps", str(args.steps),
               "--warmup", str(args.warmup), "--tile", *map(str, args.tile)]
    output = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    return json.loads(next(line for line in output.splitlines()
                           if line.startswith("TIMES "))[6:])


def main(argv=None):
    args = parse_args(argv)
    if args.ddp_worker:
        return ddp_worker(args)
    import torch

    from nntile_spmd.runtime.threads import limit_blas_threads
    x, y, params = batch_data()
    # (label, threads, step function, setup before each step)
    configs = [
        ("pytorch 1 thread", 1, torch_step, make_torch(args, params), torch.set_num_threads),
        ("ours 1 rank x 1 thread", 1, our_step, make_ours(args, params),
         limit_blas_threads),
        ("pytorch 2 threads", 2, torch_step, make_torch(args, params), torch.set_num_threads),
        ("ours 1 rank x 2 task threads", 2, our_step,
         make_ours(args, params, threads=2, task_threads=2), lambda _: limit_blas_threads(1)),
        ("ours 1 rank x 2 BLAS threads", 2, our_step,
         make_ours(args, params, threads=2, task_threads=1), limit_blas_threads),
    ]
    losses = {}
    for label, threads, step, state, setup in configs:
        setup(threads)
        for _ in range(args.warmup):
            losses[label] = step(state, x, y)[1]
    if not args.no_wait:
        print(f"machine busy before start: {wait_for_quiet():.0%} of all cores")
    times = {label: [] for label, *_ in configs}
    with CpuLoad() as load:
        for _ in range(args.steps):
            for label, threads, step, state, setup in configs:
                setup(threads)
                times[label].append(step(state, x, y)[0])
    if not args.no_ddp:
        times["ours 2 ranks x 1 thread (DDP)"] = run_ddp(args)
    print_result(args, times, losses, load)
    limit_blas_threads(1)
    serial_ms, scheduled_ms = schedule_bound(configs[1][3][0], 2)
    print(f"bound: the serial step's tasks ({serial_ms:.1f} ms of kernels, measured) "
          f"scheduled on 2 workers with the executor's dependencies: {scheduled_ms:.1f} ms, "
          f"at most {serial_ms / scheduled_ms:.2f}x from 2 task threads")


def print_result(args, times, losses, load):
    print(f"MLP {'-'.join(map(str, SIZES))} batch {BATCH}, AdamW, fp32, tiles "
          f"{args.tile[0]} (hidden) x {args.tile[1]} (batch); {args.steps} timed steps "
          f"each after {args.warmup} warm-up")
    print("losses after the warm-up steps (same weights and data): "
          + ", ".join(f"{label} {value:.6f}" for label, value in losses.items()))
    best = {label: min(values) for label, values in times.items()}
    median = {label: statistics.median(values) for label, values in times.items()}
    print(f"{'':34s} {'best ms':>8s} {'median ms':>10s}")
    for label in times:
        print(f"{label:34s} {best[label] * 1e3:8.1f} {median[label] * 1e3:10.1f}")
    ours2 = [label for label in times if label.startswith("ours") and "1 rank x 1" not in label]
    best2 = min(ours2, key=best.get)
    for label, mine, theirs in (
            ("1 thread: ours / pytorch", "ours 1 rank x 1 thread", "pytorch 1 thread"),
            ("2 threads: ours best / pytorch", best2, "pytorch 2 threads")):
        print(f"{label}: best {best[mine] / best[theirs]:.2f}, median "
              f"{median[mine] / median[theirs]:.2f} ({mine})")
    speedup = best["ours 1 rank x 1 thread"] / best["ours 1 rank x 2 task threads"]
    print(f"one rank, 2 task threads vs 1 thread: {speedup:.2f}x faster (best of each)")
    print(f"other processes during the interleaved runs: {load.others():.0%} of all cores")


if __name__ == "__main__":
    main()
