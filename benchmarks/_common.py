"""Helpers shared by the benchmark scripts (not a benchmark itself).

The development machines are small (2 cores) and shared: a test suite started by
someone else halves any number measured meanwhile. `wait_for_quiet` waits (a
bounded time) until the other processes leave the cores idle, and `CpuLoad`
reports how busy the machine was during a measurement, so that a contaminated
table says so instead of passing as a result.
"""

from __future__ import annotations

import os
import time


def _cpu_times():
    """(busy, total) jiffies of all cores since boot, from /proc/stat."""
    with open("/proc/stat") as stat:
        fields = [int(v) for v in stat.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)    # idle + iowait
    return sum(fields) - idle, sum(fields)


def busy_fraction(interval=0.5) -> float:
    """Fraction of all cores busy during the next `interval` seconds (0..1)."""
    if not os.path.exists("/proc/stat"):
        return 0.0
    busy0, total0 = _cpu_times()
    time.sleep(interval)
    busy1, total1 = _cpu_times()
    return (busy1 - busy0) / max(1, total1 - total0)


def wait_for_quiet(threshold=0.15, max_wait=120.0, interval=0.5) -> float:
    """Wait until the machine is at most `threshold` busy (or `max_wait` passed).

    Returns the last busy fraction seen (call it before measuring, while this
    process itself is idle).
    """
    deadline = time.monotonic() + max_wait
    busy = busy_fraction(interval)
    while busy > threshold and time.monotonic() < deadline:
        busy = busy_fraction(interval)
    return busy


class CpuLoad:
    """with CpuLoad() as load: ...; then load.busy is the fraction of all cores busy
    meanwhile (this benchmark included), load.own the CPU seconds this process used,
    and load.others(own_seconds) the fraction used by everything else (pass the sum
    of `own` over all processes of the benchmark, e.g. over MPI ranks)."""

    def __enter__(self):
        self.proc = os.path.exists("/proc/stat")
        self.start = _cpu_times() if self.proc else (0, 0)
        self.own_start = time.process_time()
        return self

    def __exit__(self, *exc):
        self.own = time.process_time() - self.own_start
        if self.proc:
            busy, total = _cpu_times()
            self.busy_jiffies, self.total_jiffies = busy - self.start[0], total - self.start[1]
            self.busy = self.busy_jiffies / max(1, self.total_jiffies)
        else:
            self.busy = float("nan")
        return False

    def others(self, own_seconds=None) -> float:
        """Fraction of all cores busy with other processes during the block."""
        if not self.proc:
            return float("nan")
        own = self.own if own_seconds is None else own_seconds
        hz = os.sysconf("SC_CLK_TCK")
        return max(0.0, (self.busy_jiffies / hz - own) / max(1e-9, self.total_jiffies / hz))


def median_step_ms(cg, workload, rng, steps, comm) -> float:
    """Median over `steps` executes (after one warm-up) of the slowest rank's executor
    time, in ms, for a simulate.workloads workload compiled as `cg` (collective)."""
    import statistics

    from mpi4py import MPI

    times = []
    for step in range(steps + 1):
        workload.bind_batch(cg, rng)
        cg.execute()
        slowest = comm.allreduce(cg.get_stats().execution_time_ms, op=MPI.MAX)
        if step:
            times.append(slowest)
    return statistics.median(times)
