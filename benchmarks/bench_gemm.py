"""Tiled fp32 GEMM through nntile_spmd (one rank) vs one NumPy matmul.

C = A @ B with M = N = K = 4096 (fp32). Default tiling: C is cut into 128x128
tiles = 1024 output tiles (32 x 32) = 1024 gemm tasks, each with the full K
(A tiles 128x4096, B tiles 4096x128, 32 tiles each). `--tile-k 128` also cuts K
(1024 tiles per matrix, 32768 tasks of 128^3, each accumulating with beta=1).

Both sides run under the same BLAS thread limit (threadpoolctl, applied to
NumPy's and SciPy's OpenBLAS alike), tiled and NumPy runs alternate, each after
warm-up, and the best of N is reported (the machine is shared: best-of-N
filters other processes' noise the same way for both).

Command (from the repository root):

    PYTHONPATH=. /work/venv/bin/python benchmarks/bench_gemm.py
    PYTHONPATH=. /work/venv/bin/python benchmarks/bench_gemm.py --threads 1 2 --repeat 5

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


def build(n, tile_mn, tile_k, threads):
    g = nt.LogicalGraph("gemm")
    a = g.tensor([n, n], "A", dtype="fp32", external=True)
    b = g.tensor([n, n], "B", dtype="fp32", external=True)
    c = nt.ops.gemm(a, b, "C")
    c.mark_output()
    start = time.perf_counter()
    cg = nt.compile(g, comm=nt.SimulatedWorld(1),
                    tiling=nt.TilingStrategy.manual({"A": [tile_mn, tile_k],
                                                     "B": [tile_k, tile_mn]}))
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


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=4096)
    parser.add_argument("--tile", type=int, default=128, help="tile size along M and N")
    parser.add_argument("--tile-k", type=int, default=None, help="tile size along K "
                        "(default: K untiled)")
    parser.add_argument("--threads", type=int, nargs="+", default=[2, 1])
    parser.add_argument("--repeat", type=int, default=5, help="timed runs of each (best-of)")
    args = parser.parse_args()
    n, tile_k = args.n, args.tile_k or args.n
    flops = 2.0 * n ** 3

    rng = np.random.default_rng(0)
    A = np.asfortranarray(rng.standard_normal((n, n), dtype=np.float32))
    B = np.asfortranarray(rng.standard_normal((n, n), dtype=np.float32))
    C = np.empty((n, n), dtype=np.float32, order="F")

    cg, plan_s = build(n, args.tile, tile_k, None)
    cg.bind_data("A", A)
    cg.bind_data("B", B)
    tasks = sum(1 for i in cg.plan.program(0) if type(i).__name__ == "Exec")
    grid = n // args.tile
    print(f"C = A @ B, fp32, n={n}; C tiles {args.tile}x{args.tile} ({grid * grid} output "
          f"tiles), K tile {tile_k}; {tasks} gemm tasks; planning {plan_s * 1e3:.0f} ms")
    print(f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '<unset>')} "
          f"OPENBLAS_L2_SIZE={os.environ.get('OPENBLAS_L2_SIZE', '<unset>')}")

    results = []
    for threads in args.threads:
        with threadpool_limits(limits=threads, user_api="blas"):
            if threads == args.threads[0]:
                for row in blas_summary():
                    print("  BLAS:", row)
            tiled, ref = [], []
            for index in range(args.repeat + 1):          # run 0 is the warm-up
                start = time.perf_counter()
                cg.execute()
                cg.wait()
                t_tiled = time.perf_counter() - start
                start = time.perf_counter()
                np.matmul(A, B, out=C)
                t_ref = time.perf_counter() - start
                if index:
                    tiled.append(t_tiled)
                    ref.append(t_ref)
            results.append((threads, min(tiled), min(ref)))
    out = cg.get_output("C")
    error = float(np.abs(out - C).max() / np.abs(C).max())

    print(f"{'threads':>7} {'tiled s':>8} {'tiled GF/s':>10} {'numpy s':>8} "
          f"{'numpy GF/s':>10} {'ratio':>6}")
    for threads, t_tiled, t_ref in results:
        print(f"{threads:>7} {t_tiled:>8.3f} {flops / t_tiled / 1e9:>10.1f} {t_ref:>8.3f} "
              f"{flops / t_ref / 1e9:>10.1f} {t_ref / t_tiled:>6.3f}")
    print(f"best of {args.repeat} after 1 warm-up, alternating; max rel. error vs numpy "
          f"{error:.1e}; ratio = numpy time / tiled time (goal >= 0.95)")


if __name__ == "__main__":
    main()
