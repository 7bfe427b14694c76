"""Simulator: ranks bound to one core share it as the scheduler runs them.

Measured on the 2-core machine of docs/simulation.md (Linux, autogroups on), with
ranks started by mpiexec, and modelled here:

- Two processes that both compute on one core do not each run at half speed: the
  scheduler lets one run for a turn (`measure_turn`: 4 ms, a timer tick), then
  the other. A rank that finds work (its message came) does not interrupt the one
  computing; it runs when that one stops or its turn ends.
- mpiexec starts every rank in a session of its own, and the scheduler shares a
  core fairly between sessions (autogroups), counting the CPU time each had. A
  rank waiting for a message polls with sched_yield, which hands the core to
  nobody outside its own session: the waiting rank keeps the core until it has had
  as much CPU as its core-mate, and at the end of a computing rank's turn a waiting
  rank that has had less takes the core and spins the same way. So a rank gets
  about half of a core it shares even while it only waits: a computing rank ran
  2.02x slower while its core-mate waited for a tile every 5 ms as the runtime does
  (benchmarks/bench_shared_core.py), and in a ping-pong on one core, one side
  computing 250 us a round and the other nothing, a round took 515 us with 257 us
  of CPU on each side (pingpong.spin_share: the waiting side's CPU time over the
  computing side's, 0.99 here; 0.05 with autogroups off, where yields hand over).
- A rank done with its step polls in the closing collective, and spins the same way.
- A rank that gets the core back after another rank computed there finds its data
  evicted from the core's caches: its work takes `switch_penalty_s` longer
  (MachineModel: measured by calibrate, GPT-2 on two ranks sharing one core against
  two ranks on a core each; spinning evicts next to nothing).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import defaultdict

EPSILON = 1e-12


class CoreScheduler:
    """Which rank holds each shared core, and the CPU time each rank has had there.

    The scheduler runs the rank that has had the least CPU time on the core: a rank
    with work computes until it has none or its turn ends; a spinning rank (one
    that polls with sched_yield) spins until a rank with work has had no more than
    it. Each update charges the time since the last one: to the holder while it
    computes, else to the spinners, lowest count first, at 1 / spin_share per
    second (a spin share s: a spinner uses up a lead of d seconds in s * d)."""

    def __init__(self, turn_s: float, spin_share: float = 1.0):
        self.turn_s = turn_s
        self.spin_rate = 1.0 / max(spin_share, 1e-3)
        self.cpu = defaultdict(float)     # rank -> CPU seconds on its core, this replay
        self.holder = {}                  # core -> the rank computing on it
        self.turn_end = {}                # core -> when the holder's turn ends
        self.ranks = {}                   # core -> (ranks with work, spinning ranks)
        self.last = 0.0
        self.last_worker = {}             # core -> the rank that computed there last
        self.switches = defaultdict(int)  # rank -> turns it began after another's work
        self.switched_in = []             # ranks whose turn began so, since last asked

    def update(self, now: float, ready: dict, spinning: dict) -> None:
        """`ready`: core -> ranks with work on it; `spinning`: core -> ranks polling
        with sched_yield (waiting for a message, or done with the step)."""
        elapsed, self.last = now - self.last, now
        for core, (_, spinners) in self.ranks.items():
            if core in self.holder:
                self.cpu[self.holder[core]] += elapsed
            elif spinners:
                self.fill(spinners, elapsed * self.spin_rate)
        self.ranks = {}
        for core in set(ready) | set(spinning):
            with_work, spinners = ready.get(core, []), spinning.get(core, [])
            self.ranks[core] = (with_work, spinners)
            holder = self.holder.get(core)
            if holder in with_work and now < self.turn_end[core]:
                continue
            # the least CPU runs (counts equal to the ns are equal: the sums of the
            # same turns in another order differ in the last bits); at equal counts a
            # rank with work before a spinner, a lower rank before a higher
            chosen = min([(round(self.cpu[rank] * 1e9), 0, rank) for rank in with_work]
                         + [(round(self.cpu[rank] * 1e9), 1, rank) for rank in spinners])
            if chosen[1]:
                self.holder.pop(core, None)     # the spinners spin
                continue
            rank = self.holder[core] = chosen[2]
            self.turn_end[core] = now + self.turn_s
            if self.last_worker.setdefault(core, rank) != rank:
                self.switches[rank] += 1
                self.switched_in.append(rank)
            self.last_worker[core] = rank
        for core in set(self.holder) - set(self.ranks):
            del self.holder[core]

    def fill(self, spinners, amount) -> None:
        """Charge `amount` to the spinners, raising the lowest counts first."""
        counts = sorted(self.cpu[rank] for rank in spinners)
        level, used = counts[0], 1
        for count in counts[1:]:
            if amount <= (count - level) * used:
                break
            amount -= (count - level) * used
            level, used = count, used + 1
        level += amount / used
        for rank in spinners:
            self.cpu[rank] = max(self.cpu[rank], level)

    def holds(self, core, rank) -> bool:
        return self.holder.get(core) == rank

    def next_change(self) -> list:
        """When a turn ends on a core others want, or the spinners have caught up
        with a rank with work (or the lowest of them with the next)."""
        times = []
        for core, (with_work, spinners) in self.ranks.items():
            if core in self.holder:
                if len(with_work) + len(spinners) > 1:
                    times.append(self.turn_end[core])
            elif with_work:
                counts = sorted(self.cpu[rank] for rank in spinners)
                lowest = sum(1 for count in counts if count <= counts[0] + EPSILON)
                target = min(self.cpu[rank] for rank in with_work)
                if lowest < len(counts):
                    target = min(target, counts[lowest])
                seconds = (target - counts[0]) * lowest / self.spin_rate
                times.append(self.last + max(seconds, EPSILON))
        return times


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
