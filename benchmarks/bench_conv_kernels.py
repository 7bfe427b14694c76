"""Paired timing of the cpu (numba im2col + BLAS) and reference (one BLAS tensordot per
tap) conv kernels on the digits CNN's shapes (examples/train_cnn.py, batch 60).

Run: python benchmarks/bench_conv_kernels.py
BLAS is limited to one thread and the two backends alternate call by call, so load from
other processes hits both alike; medians of 35 calls, fresh output arrays each call.
"""

import statistics
import sys
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from _common import CpuLoad  # noqa: E402

from nntile_kernels import cpu, reference  # noqa: E402 - needs the path above

CASES = {"conv1 8x8x1->16": ((8, 8, 1, 60), (3, 3, 1, 16), (8, 8, 16, 60), (1, 1)),
         "conv2 8x8x16->32 s2": ((8, 8, 16, 60), (3, 3, 16, 32), (4, 4, 32, 60), (2, 2))}


def paired_ms(name, make, geometry, calls=40, warm=5):
    """Median ms per call of the reference and the cpu kernel `name`, alternating."""
    times = {"reference": [], "cpu": []}
    with threadpool_limits(1):
        for _ in range(calls):
            for backend, table in (("reference", reference.KERNELS), ("cpu", cpu.KERNELS)):
                args = make()
                start = time.perf_counter()
                table[name](*args, **geometry)
                times[backend].append(time.perf_counter() - start)
    return [statistics.median(times[b][warm:]) * 1e3 for b in ("reference", "cpu")]


def main():
    rng = np.random.default_rng(0)
    with CpuLoad() as load:
        for label, (xs, cs, ys, stride) in CASES.items():
            x, c, y = (np.asfortranarray(rng.standard_normal(s).astype(np.float32))
                       for s in (xs, cs, ys))
            geometry = dict(padding=(1, 1), stride=stride, dilation=(1, 1), x_start=(0, 0),
                            c_start=(0, 0), y_start=(0, 0))
            calls = {"conv2d_inplace": (x, c, y), "conv2d_bwd_input_inplace": (y, c, x),
                     "conv2d_bwd_weight_inplace": (x, y, c)}
            for name, (first, second, out) in calls.items():
                def make(first=first, second=second, out=out):   # a fresh output per call
                    return first, second, np.zeros_like(out)
                ref, fast = paired_ms(name, make, geometry)
                print(f"{label:20s} {name:26s} reference {ref:7.3f} ms  cpu {fast:7.3f} ms  "
                      f"reference/cpu {ref / fast:5.2f}")
    print(f"other processes kept {load.others():.0%} of the cores busy meanwhile")


if __name__ == "__main__":
    main()
