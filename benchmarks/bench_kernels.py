"""Per-call cost of the cpu kernels on small tiles and BLAS throughput of cpu gemm.

Run: python benchmarks/bench_kernels.py [--gemm-size 1024]
Prints µs per call for a 32x32 fp32 gelu tile (numba kernel vs NumPy reference, plus
the bare numba dispatch cost), ns per element of the cpu elementwise and softmax kernels
on a 512x512 fp32 tile (--elements), and fp32 gemm GFLOP/s of nntile_kernels.cpu vs `a @ b`.
"""

import argparse
import sys
import timeit
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from nntile_kernels import cpu, cpu_rules_params, reference  # noqa: E402 - needs the path above


def per_call_us(functions, repeat=5, target_seconds=0.2):
    """Best-of-`repeat` µs per call of each function, the functions timed in turn.

    Interleaving the repeats keeps load from other processes from favouring one.
    """
    numbers = [
        max(1, int(target_seconds / max(timeit.timeit(f, number=3) / 3, 1e-9))) for f in functions
    ]
    best = [float("inf")] * len(functions)
    for _ in range(repeat):
        for index, (function, number) in enumerate(zip(functions, numbers)):
            seconds = timeit.timeit(function, number=number) / number
            best[index] = min(best[index], seconds * 1e6)
    return best


def bench_small_tile(size=32):
    """gelu on one size x size fp32 tile: numba, NumPy, and numba's own dispatch floor."""
    rng = np.random.default_rng(0)
    x = np.asfortranarray(rng.standard_normal((size, size), dtype=np.float32))
    y = np.empty_like(x, order="F")
    one = np.zeros(1, np.float32)
    cpu.KERNELS["gelu"](x, y)  # compile (or load from the numba cache) outside the timing
    cpu_rules_params._scale(one, one, 1.0)
    labels = ("cpu gelu", "reference gelu", "numba dispatch (1-element scale)")
    timings = per_call_us(
        [
            lambda: cpu.KERNELS["gelu"](x, y),
            lambda: reference.KERNELS["gelu"](x, y),
            lambda: cpu_rules_params._scale(one, one, 1.0),
        ]
    )
    print(f"{size}x{size} fp32 tile, µs per call:")
    for label, microseconds in zip(labels, timings):
        print(f"  {label:34s} {microseconds:8.2f}")


# kernel -> (arguments as tiles made by `make`, keyword parameters)
PER_ELEMENT = {
    "gelu": ("x y", {}), "gelutanh": ("x y", {}), "silu": ("x y", {}), "relu": ("x y", {}),
    "gelu_backward": ("x d y", {}), "gelutanh_backward": ("x d y", {}),
    "add": ("x d y", {"alpha": 1.0, "beta": 1.0}),
    "logsumexp": ("x s", {"axis": 0}), "softmax_from_logsumexp": ("s x y", {"axis": 0}),
}


def bench_per_element(edge=512):
    """ns per element of cpu kernels on one edge x edge fp32 tile (NumPy's tanh, exp beside)."""
    rng = np.random.default_rng(0)
    tiles = {name: np.asfortranarray(rng.standard_normal((edge, edge), dtype=np.float32))
             for name in "xdy"}
    tiles["s"] = np.zeros(edge, np.float32)
    calls = {name: (lambda n=name, a=args, k=params:
                    cpu.KERNELS[n](*[tiles[t] for t in a.split()], **k))
             for name, (args, params) in PER_ELEMENT.items()}
    calls["numpy tanh (reference point)"] = lambda: np.tanh(tiles["x"], out=tiles["y"])
    calls["numpy exp (reference point)"] = lambda: np.exp(tiles["x"], out=tiles["y"])
    for call in calls.values():
        call()   # compile (or load from the numba cache) outside the timing
    timings = per_call_us(list(calls.values()), repeat=5, target_seconds=0.1)
    print(f"{edge}x{edge} fp32 tile, ns per element:")
    for label, microseconds in zip(calls, timings):
        print(f"  {label:34s} {microseconds * 1e3 / edge**2:8.2f}")


def bench_gemm(n):
    """fp32 n^3 gemm through cpu.KERNELS['gemm'] (BLAS in place) vs NumPy's a @ b."""
    rng = np.random.default_rng(0)
    a, b = (np.asfortranarray(rng.standard_normal((n, n), dtype=np.float32)) for _ in range(2))
    c = np.empty((n, n), np.float32, order="F")
    flops = 2.0 * n**3
    kernel_us, numpy_us = per_call_us(
        [lambda: cpu.KERNELS["gemm"](a, b, c), lambda: a @ b], repeat=5, target_seconds=0.5
    )
    kernel_s, numpy_s = kernel_us / 1e6, numpy_us / 1e6
    print(f"gemm {n}^3 fp32, GFLOP/s:")
    print(f"  {'cpu gemm kernel':34s} {flops / kernel_s / 1e9:8.1f}")
    print(f"  {'numpy a @ b':34s} {flops / numpy_s / 1e9:8.1f}")
    print(f"  {'ratio kernel / numpy':34s} {numpy_s / kernel_s:8.2f}")


def main():
    """Parse the sizes and print both benchmarks."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tile", type=int, default=32, help="edge of the small square tile")
    parser.add_argument("--gemm-size", type=int, default=1024, help="m = n = k of the gemm")
    parser.add_argument("--elements", type=int, default=512, help="edge of the per-element tile")
    options = parser.parse_args()
    bench_small_tile(options.tile)
    bench_per_element(options.elements)
    bench_gemm(options.gemm_size)


if __name__ == "__main__":
    main()
