"""reshape planned as a view vs as a copy: planned and measured peak bytes, bytes sent,
and time per execute, paired in one run (the same graph and data, two tilings).

x [n, n] fp32 -> h = 2x -> y = reshape(h, [n/2, 2n]) -> z = 3y (output). The view
tiling cuts both into whole-column tiles (every y tile is an h tile); the copy tiling
cuts x's rows as well, so y's tiles gather pieces of several h tiles.

    python benchmarks/bench_views.py [--n 2048] [--ranks 2] [--repeats 5]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import nntile_spmd as nt
from nntile_spmd import ops


def build(n):
    g = nt.LogicalGraph("views")
    x = g.tensor([n, n], "x", "fp32", external=True)
    ops.scale(ops.reshape(ops.scale(x, "h", 2.0), "y", [n // 2, 2 * n]), "z", 3.0).mark_output()
    return g


def measure(n, ranks, tiles, repeats, data):
    cg = nt.compile(build(n), comm=nt.SimulatedWorld(ranks), distribution="ddp",
                    tiling=nt.TilingStrategy.explicit(tiles))
    cg.bind_data("x", data)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        cg.execute()
        times.append(time.perf_counter() - start)
    peaks = [cg.memory_on_rank(r) for r in range(ranks)]
    measured = [cg.get_stats(r).peak_bytes for r in range(ranks)]
    assert np.array_equal(cg.get_output("z"), 6 * data.reshape(n // 2, 2 * n, order="F"))
    return bool(cg.plan.views), peaks, measured, cg.estimate_communication(), min(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=2048)
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    n = args.n
    data = np.random.default_rng(0).standard_normal((n, n)).astype(np.float32)
    cases = {"view": {"x": [n, 64], "y": [n // 2, 128]},
             "copy": {"x": [n // 2 + 1, 64], "y": [n // 2, 128]}}
    print(f"x [{n}, {n}] fp32, {args.ranks} simulated ranks, ddp, best of {args.repeats}")
    print("tiling  view  peak/rank planned  peak/rank measured  sent  ms/execute")
    for name, tiles in cases.items():
        view, peaks, measured, sent, best = measure(n, args.ranks, tiles, args.repeats, data)
        print(f"{name:6}  {view!s:5} {peaks} {measured} {sent} {best * 1e3:.1f}")


if __name__ == "__main__":
    main()
