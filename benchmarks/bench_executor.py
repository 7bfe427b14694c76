"""Executor cost per task with tiny tiles (one rank), and planning time.

Graph: x [G*T, G*T] fp32, tiled T x T (a G x G grid), then a chain of L elementwise ops
(relu, scale, add(x), gelu, multiply(x), silu, ... each a new tensor), the last
one marked as output. Each op is G^2 tile tasks; intermediates are freed
after their last use, so the program has EXEC and FREE instructions.

Reported:
  * plan ms: nt.compile + deriving the programs (the whole planning path);
  * execute us/task: wall time of cg.execute() / number of EXEC tasks;
  * kernel us/task: the same kernels on the same tile arrays, called from a
    minimal pre-bound Python loop (`for f, args, kw in calls: f(*args, **kw)`),
    i.e. what the tasks cost with zero scheduling;
  * overhead us/task = execute - kernel (goal: <= 2 us; Dask ~50 us per task).

`--clock cpu` times both with this process's CPU time (time.process_time, all
threads) instead of the wall clock: on a machine that other processes keep busy,
time spent waiting for a core then counts for neither.

Runs through comm=None (a world of one MPI rank, the real MPIWorld path) with the
serial executor and with 2 task threads ("2 tt": the threaded executor; tiny tasks
run on its executor thread, so this is the cost of its dependency tracking), and
through nt.SimulatedWorld(1). Best of --repeat timed runs after a warm-up.

Command (from the repository root):

    PYTHONPATH=. /work/venv/bin/python benchmarks/bench_executor.py
    PYTHONPATH=. /work/venv/bin/python benchmarks/bench_executor.py --tile 4 --profile
    PYTHONPATH=. /work/venv/bin/python benchmarks/bench_executor.py --repeat 5 --clock cpu

With --profile the hot loop is run under cProfile and the top entries printed.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import nntile_spmd as nt
from nntile_spmd.plan.instructions import Exec

from _common import CpuLoad, wait_for_quiet

CHAIN = ("relu", "scale", "add", "gelu", "multiply", "silu")


def build_graph(size, length):
    g = nt.LogicalGraph("chain")
    x = g.tensor([size, size], "x", dtype="fp32", external=True)
    h = x
    for index in range(length):
        kind, name = CHAIN[index % len(CHAIN)], f"h{index}"
        if kind == "scale":
            h = nt.ops.scale(h, name, 0.5)
        elif kind == "add":
            h = nt.ops.add(1.0, h, 0.25, x, name)
        elif kind == "multiply":
            h = nt.ops.multiply(h, x, name)
        else:
            h = getattr(nt.ops, kind)(h, name)
    h.mark_output()
    return g, h.name


def compile_graph(size, tile, length, comm, task_threads=1):
    start = time.perf_counter()
    g, out = build_graph(size, length)
    cg = nt.compile(g, comm=comm, tiling=nt.TilingStrategy.manual({"x": [tile, tile]}),
                    task_threads=task_threads)
    program = cg.plan.program(0)
    return cg, out, program, time.perf_counter() - start


def kernel_only_calls(cg, program):
    """(kernel, arrays, params) of every EXEC with fresh arrays of the tile shapes."""
    kernels = cg.device.kernels
    arrays = {}
    rng = np.random.default_rng(1)
    calls = []
    for instruction in program:
        if type(instruction) is not Exec:
            continue
        for key in instruction.keys:
            if key not in arrays:
                meta = cg.plan.meta[key]
                arrays[key] = np.asfortranarray(rng.random(meta.shape, dtype=np.float32))
        calls.append((kernels[instruction.kernel],
                      tuple(arrays[key] for key in instruction.keys), instruction.params))
    return calls


CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}
clock = CLOCKS["wall"]


def run_kernels(calls):
    start = clock()
    for function, args, params in calls:
        function(*args, **params)
    return clock() - start


def timed_execute(cg):
    start = clock()
    cg.execute()
    cg.wait()
    return clock() - start


def measure(size, tile, length, comm, repeat, task_threads=1):
    cg, out, program, plan_s = compile_graph(size, tile, length, comm, task_threads)
    x = np.asfortranarray(np.random.default_rng(0).random((size, size), dtype=np.float32))
    cg.bind_data("x", x)
    tasks = sum(1 for i in program if type(i) is Exec)
    calls = kernel_only_calls(cg, program)
    run_kernels(calls)
    timed_execute(cg)                                  # warm-up (numba, allocator)
    t_exec, t_kern = [], []
    for _ in range(repeat):                            # alternate: same noise for both
        t_exec.append(timed_execute(cg))
        t_kern.append(run_kernels(calls))
    peak_ok = cg.get_stats(0).peak_bytes == cg.memory_on_rank(0)
    return dict(tasks=tasks, instructions=len(program), plan_s=plan_s,
                exec_s=min(t_exec), kernel_s=min(t_kern), peak_ok=peak_ok, cg=cg)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--grid", type=int, default=32,
                        help="tiles per dim: each op is grid^2 tasks (default 32 -> 1024)")
    parser.add_argument("--tile", type=int, nargs="+", default=[4, 1],
                        help="tile edge(s) to measure")
    parser.add_argument("--ops", type=int, default=None,
                        help="chain length (default: ~20000 tasks per run)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                        help="wall time, or this process's CPU time (busy machines)")
    parser.add_argument("--no-wait", action="store_true",
                        help="do not wait for the machine to be idle first")
    args = parser.parse_args()
    global clock
    clock = CLOCKS[args.clock]
    import nntile_kernels
    nntile_kernels.get_kernels("cpu")           # imports (numba, scipy) are not planning
    warm = compile_graph(4, 1, len(CHAIN), nt.SimulatedWorld(1))[0]
    warm.bind_data("x", np.ones((4, 4), dtype=np.float32))
    warm.execute()                       # numba's first calls (cached compilations)
    if not args.no_wait:
        print(f"machine busy before start: {wait_for_quiet():.0%} of all cores")

    print(f"{'world':>12} {'tiles':>7} {'tasks':>6} {'instr':>6} {'plan ms':>8} "
          f"{'plan us/task':>12} {'exec us/task':>12} {'kernel us/task':>14} "
          f"{'overhead us/task':>16} {'peak==plan':>10}")
    load = CpuLoad().__enter__()
    for tile in args.tile:
        size = args.grid * tile
        length = args.ops or max(1, 20000 // args.grid ** 2)
        for label, comm, task_threads in (
                ("mpi(1)", None, 1), ("mpi(1) 2 tt", None, 2),
                ("simulated(1)", nt.SimulatedWorld(1), 1)):
            r = measure(size, tile, length, comm, args.repeat, task_threads)
            per = 1e6 / r["tasks"]
            print(f"{label:>12} {tile:>3}x{tile:<3} {r['tasks']:>6} {r['instructions']:>6} "
                  f"{r['plan_s'] * 1e3:>8.0f} {r['plan_s'] * per:>12.1f} "
                  f"{r['exec_s'] * per:>12.2f} {r['kernel_s'] * per:>14.2f} "
                  f"{(r['exec_s'] - r['kernel_s']) * per:>16.2f} {str(r['peak_ok']):>10}")
            if args.profile and label == "mpi(1)":
                import cProfile
                import pstats
                profiler = cProfile.Profile()
                profiler.enable()
                timed_execute(r["cg"])
                profiler.disable()
                pstats.Stats(profiler).sort_stats("tottime").print_stats(12)
    load.__exit__(None, None, None)
    print(f"other processes during the runs: {load.others():.0%} of all cores")
    print(f"chain of {length} ops ({'/'.join(CHAIN)}/...) on a {args.grid}x{args.grid} grid "
          f"of fp32 tiles; best of "
          f"{args.repeat} ({args.clock} clock); overhead = exec - kernel (goal <= 2 us/task)")


if __name__ == "__main__":
    main()
