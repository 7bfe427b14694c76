"""What OpenBLAS gives tile-sized calls: one BLAS thread, no framework.

C = A @ B, fp32, n = 4096, computed (1) as one call, and in bare loops over per-tile
arrays with the project's cpu gemm kernel: (2) one call per T x T tile of C with the
full K (m = n = T, k = 4096), (3) T^3 products accumulating into the C tile with
beta = 1, (4) one call per row panel of T rows of C (m = T, n = k = 4096). Each is
reported as GFLOP/s and as a fraction of (1): the ceiling of a tiled product that
makes one BLAS call per task, whatever runs the tasks (bench_gemm.py's "loop" column
is (2) or (3) for its tiling). CPU time (time.process_time), best of --repeat after a
warm-up, so that other processes on the machine change little.

Command (from the repository root):

    PYTHONPATH=. python benchmarks/bench_blas_tiles.py --tiles 128 256 512
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from threadpoolctl import threadpool_limits

from nntile_kernels.cpu_blas import gemm


def best_cpu_seconds(function, repeat):
    function()
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        function()
        best = min(best, time.process_time() - start)
    return best


def tile_loops(A, B, tile):
    """{pattern: function} of the per-tile call patterns for `tile`."""
    grid = A.shape[0] // tile
    cut = [slice(index * tile, (index + 1) * tile) for index in range(grid)]
    a_tiles = [[np.asfortranarray(A[i, k]) for k in cut] for i in cut]
    b_tiles = [[np.asfortranarray(B[k, j]) for j in cut] for k in cut]
    c_tiles = [[np.empty((tile, tile), np.float32, order="F") for _ in cut] for _ in cut]
    a_rows = [np.asfortranarray(A[i]) for i in cut]
    b_cols = [np.asfortranarray(B[:, j]) for j in cut]
    c_rows = [np.empty((tile, A.shape[0]), np.float32, order="F") for _ in cut]

    def full_k():
        for i in range(grid):
            for j in range(grid):
                gemm(a_rows[i], b_cols[j], c_tiles[i][j])

    def cubes():
        for i in range(grid):
            for j in range(grid):
                for k in range(grid):
                    gemm(a_tiles[i][k], b_tiles[k][j], c_tiles[i][j], beta=float(k > 0))

    def row_panels():
        for i in range(grid):
            gemm(a_rows[i], B, c_rows[i])

    return {"C tile, full K": full_k, "T^3, beta=1": cubes, "row panel": row_panels}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=4096)
    parser.add_argument("--tiles", type=int, nargs="+", default=[128, 256, 512])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    A = np.asfortranarray(rng.standard_normal((args.n, args.n), dtype=np.float32))
    B = np.asfortranarray(rng.standard_normal((args.n, args.n), dtype=np.float32))
    C = np.empty((args.n, args.n), np.float32, order="F")
    gflop = 2.0 * args.n ** 3 / 1e9
    with threadpool_limits(limits=1, user_api="blas"):
        whole = best_cpu_seconds(lambda: gemm(A, B, C), args.repeat)
        print(f"one call, n={args.n}: {gflop / whole:.1f} GFLOP/s (1 BLAS thread, CPU time)")
        print(f"{'tile':>5} {'pattern':>15} {'GFLOP/s':>8} {'of one call':>11}")
        for tile in args.tiles:
            for name, function in tile_loops(A, B, tile).items():
                seconds = best_cpu_seconds(function, args.repeat)
                print(f"{tile:>5} {name:>15} {gflop / seconds:>8.1f} {whole / seconds:>11.3f}")


if __name__ == "__main__":
    main()
