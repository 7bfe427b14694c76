"""Runtime layer: how many of the node's cores other processes took since the last look.

From /proc/stat (busy and total jiffies of all cores) and this process's own CPU
time (os.times: every thread of it), so the measurement needs no privileges and no
thread of its own. Where /proc/stat is missing (not Linux) nothing is measured.
Jiffies tick every 10 ms, so an estimate is only taken over at least MIN_INTERVAL_S.
"""

from __future__ import annotations

import os

MIN_INTERVAL_S = 0.2


def read_cpu_times():
    """(busy jiffies, total jiffies, cores) of the node, or None without /proc/stat."""
    try:
        with open("/proc/stat") as stat:
            lines = stat.read().splitlines()
    except OSError:
        return None
    fields = [int(value) for value in lines[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)    # idle + iowait
    cores = sum(1 for line in lines if line.startswith("cpu") and line[3:4].isdigit())
    return sum(fields) - idle, sum(fields), max(1, cores)


def own_cpu_seconds() -> float:
    times = os.times()
    return times.user + times.system


class CoreShare:
    """others_busy_cores(): cores other processes kept busy since the previous call."""

    def __init__(self, read=read_cpu_times, own=own_cpu_seconds):
        self.read, self.own = read, own
        self.last = self.sample()

    def sample(self):
        times = self.read()
        return None if times is None else (*times, self.own())

    def others_busy_cores(self):
        """Cores busy with other processes since the last estimate, or None when there
        is nothing to measure or less than MIN_INTERVAL_S went by (then the next call
        measures from the same start)."""
        now = self.sample()
        if now is None or self.last is None:
            self.last = now
            return None
        busy, total, cores, own = (after - before for after, before in zip(now, self.last))
        hz = os.sysconf("SC_CLK_TCK")
        interval_s = total / hz / now[2]
        if interval_s < MIN_INTERVAL_S:
            return None
        self.last = now
        return max(0.0, (busy / hz - own) / interval_s)
