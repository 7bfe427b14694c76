"""Tiled fp32 GEMM through nntile_spmd (one rank) vs one NumPy matmul.

C = A @ B with M = N = K = 4096 (fp32, 137 GFLOP). Headline tiling: C is cut
into 128x128 tiles = 1024 output tiles (32 x 32) = 1024 gemm tasks, each with
the full K (A tiles 128x4096, B tiles 4096x128, 32 tiles each). The second
row uses 1024x1024 C tiles (16 tasks of 1024x4096x1024). `--tile-k 128` also
cuts K (then every matrix has 1024 tiles of 128x128: 32768 tasks of 128^3
accumulating with beta=1).

Three timings per row, interleaved (in rotating order), best of N after a
warm-up, all under the
same BLAS thread limit (threadpoolctl on NumPy's and SciPy's OpenBLAS alike):
  tiled  cg.execute() on nt.SimulatedWorld(1) (the executor's loop, one rank)
  loop   the very same kernel calls on the same tile arrays, pre-bound, in a
         bare Python loop: the cost of the tiling alone (BLAS on 128-wide tiles)
  numpy  one np.matmul of the whole matrices
  tasks  (threads > 1) cg.execute() with `threads` task threads, BLAS 1 thread
         each: the threaded executor runs tile tasks side by side
tiled/numpy is the headline ratio (goal >= 0.95); tiled/loop isolates the
framework's own cost; tasks/numpy is the threaded executor's ratio.

Command (from the repository root):

    PYTHONPATH=. /work/venv/bin/python benchmarks/bench_gemm.py
    PYTHONPATH=. /work/venv/bin/python benchmarks/bench_gemm.py --tiles 128 --tile-k 128

`--clock cpu` times with this process's CPU time (all threads) instead of the wall
clock: on a machine other processes keep busy, use it with `--threads 1` (with more
BLAS threads it sums their spinning too, so it no longer compares wall times).

Only if OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE are set in the environment, the
documented comparison unsets both in this one command:
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE PYTHONPATH=. ... bench_gemm.py
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits

import nntile_spmd as nt
from nntile_spmd.plan.instructions import Exec

from _common import CpuLoad, wait_for_quiet


def build(n, tile_mn, tile_k, task_threads=1):
    g = nt.LogicalGraph("gemm")
    a = g.tensor([n, n], "A", dtype="fp32", external=True)
    b = g.tensor([n, n], "B", dtype="fp32", external=True)
    c = nt.ops.gemm(a, b, "C")
    c.mark_output()
    start = time.perf_counter()
    cg = nt.compile(g, comm=nt.SimulatedWorld(1),
                    tiling=nt.TilingStrategy.manual({"A": [tile_mn, tile_k],
                                                     "B": [tile_k, tile_mn]}),
                    task_threads=task_threads)
    cg.plan.programs()   # programs are derived lazily: count them as planning
    plan_s = time.perf_counter() - start
    return cg, plan_s


def blas_summary():
    rows = []
    for info in threadpool_info():
        if info.get("user_api") == "blas":
            rows.append(f"{info['internal_api']} {info['version']} "
                        f"{info.get('architecture')} threads={info['num_threads']} "
                        f"({os.path.basename(info['filepath'])})")
    return rows


def kernel_calls(cg):
    """Every EXEC of rank 0's program as (kernel, tile arrays, params), pre-bound."""
    kernels, tiles = cg.device.kernels, cg.stores[0].tiles
    return [(kernels[i.kernel], tuple(tiles[k] for k in i.keys), i.params)
            for i in cg.plan.program(0) if type(i) is Exec]


def run_calls(calls):
    for function, arrays, params in calls:
        function(*arrays, **params)


CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


def measure(cg, A, B, C, threads, repeat, threaded=None, clock=time.perf_counter):
    """Best-of times of execute(), the bare kernel loop, NumPy and (with `threaded`,
    a graph compiled with task_threads=threads) the threaded executor, interleaved."""
    calls = kernel_calls(cg)
    runs = [("tiled", cg.execute, threads), ("loop", lambda: run_calls(calls), threads),
            ("numpy", lambda: np.matmul(A, B, out=C), threads)]
    if threaded is not None:
        runs.append(("tasks", threaded.execute, 1))
    times = {name: [] for name, _, _ in runs}
    for index in range(repeat + 1):          # run 0 is the warm-up
        # rotate the order: whichever runs after another inherits its warm caches
        for name, function, blas_threads in runs[index % 3:] + runs[:index % 3]:
            with threadpool_limits(limits=blas_threads, user_api="blas"):
                start = clock()
                function()
                elapsed = clock() - start
            if index:
                times[name].append(elapsed)
    return {name: min(values) for name, values in times.items()}


def check(cg, C, label):
    error = float(np.abs(cg.get_output("C") - C).max() / np.abs(C).max())
    if error > 1e-5:
        raise SystemExit(f"{label} result differs from NumPy: max rel. error {error:.1e}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=4096)
    parser.add_argument("--tiles", type=int, nargs="+", default=[128, 1024],
                        help="C tile edge(s) along M and N; the first is the headline")
    parser.add_argument("--tile-k", type=int, default=None, help="tile size along K "
                        "(default: K untiled)")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--repeat", type=int, default=4, help="timed runs of each (best-of)")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                        help="wall time, or this process's CPU time (busy machines)")
    parser.add_argument("--no-wait", action="store_true",
                        help="do not wait for the machine to be idle first")
    args = parser.parse_args()
    n, tile_k = args.n, args.tile_k or args.n
    flops = 2.0 * n ** 3
    import nntile_kernels
    nntile_kernels.get_kernels("cpu")                  # imports (numba, scipy) are not planning

    rng = np.random.default_rng(0)
    A = np.asfortranarray(rng.standard_normal((n, n), dtype=np.float32))
    B = np.asfortranarray(rng.standard_normal((n, n), dtype=np.float32))
    C = np.empty((n, n), dtype=np.float32, order="F")
    print(f"C = A @ B, fp32, n={n} ({flops / 1e9:.0f} GFLOP), one rank (SimulatedWorld(1)); "
          f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '<unset>')} "
          f"OPENBLAS_L2_SIZE={os.environ.get('OPENBLAS_L2_SIZE', '<unset>')}")
    for row in blas_summary():
        print("  BLAS:", row)
    if not args.no_wait:
        print(f"  machine busy before start: {wait_for_quiet():.0%} of all cores")

    rows = []
    with CpuLoad() as load:
        for tile in args.tiles:
            cg, plan_s = build(n, tile, tile_k)
            cg.bind_data("A", A)
            cg.bind_data("B", B)
            tasks = sum(1 for i in cg.plan.program(0) if type(i) is Exec)
            for threads in args.threads:
                threaded = None
                if threads > 1:
                    threaded = build(n, tile, tile_k, task_threads=threads)[0]
                    threaded.bind_data("A", A)
                    threaded.bind_data("B", B)
                best = measure(cg, A, B, C, threads, args.repeat, threaded,
                               CLOCKS[args.clock])
                rows.append((tile, tasks, plan_s, threads, best))
                if threaded is not None:
                    check(threaded, C, "threaded")
                    del threaded
            check(cg, C, "tiled")
            del cg

    print(f"{'C tile':>9} {'tasks':>5} {'plan ms':>7} {'threads':>7} {'tiled GF/s':>10} "
          f"{'loop GF/s':>9} {'numpy GF/s':>10} {'tiled/numpy':>11} {'tiled/loop':>10} "
          f"{'tasks GF/s':>10} {'tasks/numpy':>11}")
    for tile, tasks, plan_s, threads, best in rows:
        gf = {name: flops / t / 1e9 for name, t in best.items()}
        threaded = (f"{gf['tasks']:>10.1f} {best['numpy'] / best['tasks']:>11.3f}"
                    if "tasks" in best else f"{'-':>10} {'-':>11}")
        print(f"{tile:>4}x{tile:<4} {tasks:>5} {plan_s * 1e3:>7.0f} {threads:>7} "
              f"{gf['tiled']:>10.1f} {gf['loop']:>9.1f} {gf['numpy']:>10.1f} "
              f"{best['numpy'] / best['tiled']:>11.3f} {best['loop'] / best['tiled']:>10.3f} "
              f"{threaded}")
    k_text = f"K tile {tile_k}" if args.tile_k else f"K untiled ({n})"
    print(f"{k_text}; best of {args.repeat} interleaved runs after a warm-up "
          f"({args.clock} clock); loop = the same BLAS calls on the same tiles without "
          f"the framework; "
          f"other processes during the runs: {load.others():.0%} of all cores")


if __name__ == "__main__":
    main()
