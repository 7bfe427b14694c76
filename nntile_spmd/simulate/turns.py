"""Simulator: ranks bound to one core take turns on it, as the scheduler runs them.

Two processes that both compute on one core do not each run at half speed: the
scheduler lets one run for a turn (measured by `measure_turn`: 4 ms on the 2-core
machine of docs/simulation.md, a timer tick), then the other. A tile the waiting
one was about to send is late by up to a turn, which sharing the core evenly does
not show. A rank that waited for a message polls with sched_yield, which the
scheduler answers within microseconds, so once its message is there it takes the
core from the one computing (a fresh turn), and leaves it as soon as it waits
again. A rank done with its step polls in MPI's closing collective without
yielding, and takes its turns like a computing one.
"""

from __future__ import annotations

import os
import subprocess
import sys


class CoreTurns:
    """Which rank holds each shared core, and until when."""

    def __init__(self, turn_s: float):
        self.turn_s = turn_s
        self.holder = {}        # core -> rank
        self.turn_end = {}      # core -> time the holder's turn ends
        self.contenders = {}    # core -> ranks that wanted it at the last update

    def update(self, now, wanting: dict, woke: set) -> None:
        """`wanting`: core -> ranks that want it now (in rank order); `woke`: ranks
        that stopped waiting for a message since the last update."""
        for core, ranks in wanting.items():
            holder, before = self.holder.get(core), self.contenders.get(core, ())
            came = [rank for rank in ranks if rank in woke and rank not in before]
            if came:
                holder = came[0]
            elif holder not in ranks or (len(ranks) > 1 and now >= self.turn_end[core]):
                holder = self.next_after(holder, ranks)
            else:
                self.contenders[core] = ranks
                continue
            self.holder[core], self.turn_end[core] = holder, now + self.turn_s
            self.contenders[core] = ranks
        for core in set(self.holder) - set(wanting):
            del self.holder[core], self.turn_end[core]
            self.contenders.pop(core, None)

    @staticmethod
    def next_after(holder, ranks):
        later = [rank for rank in ranks if holder is not None and rank > holder]
        return later[0] if later else ranks[0]

    def holds(self, core, rank) -> bool:
        return self.holder.get(core) == rank

    def next_change(self) -> list:
        """Times at which a turn ends on a core that others want."""
        return [self.turn_end[core] for core, ranks in self.contenders.items()
                if len(ranks) > 1 and core in self.turn_end]


SPIN = """
import os, sys, time
os.sched_setaffinity(0, {int(sys.argv[1])})
clock, last, gaps = time.perf_counter, time.perf_counter(), []
end = last + float(sys.argv[2])
while last < end:
    now = clock()
    if now - last > 5e-5:
        gaps.append(now - last)
    last = now
print(sum(gaps) / len(gaps) if gaps else 0.0)
"""


def measure_turn(seconds: float = 1.0) -> float:
    """Mean time one of two busy processes bound to the same core waits for its next
    turn: the other's turn (0.0 where binding is not possible)."""
    if not hasattr(os, "sched_getaffinity"):
        return 0.0
    core = str(min(os.sched_getaffinity(0)))
    spinners = [subprocess.Popen([sys.executable, "-c", SPIN, core, str(seconds)],
                                 stdout=subprocess.PIPE, text=True) for _ in range(2)]
    gaps = [float(spinner.communicate(timeout=60 + seconds)[0]) for spinner in spinners]
    return sum(gaps) / len(gaps)
