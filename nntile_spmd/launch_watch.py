"""The launcher's watch over its ranks: who ended first, and a deadline for the end.

mpiexec names a rank that ended badly by a pid, and often the wrong one: after one
rank is killed it kills the others and reports whichever it saw end (rank 0 or 1 for
a kill of rank 2 of 4). Under the launcher each rank runs under a supervisor process
(rank_entry.py) that records how its rank ended (`rank<R>.status`) before mpiexec can
learn of it; the ranks mpiexec kills afterwards record nothing, so the status files
name the rank that ended first.

And no deadline covered the end of a job: once one rank's script has returned
(`rank<R>.end`), the others get the deadline to finish theirs; past it the launcher
names them (stopped, or still running: hung) and ends the job. Ranks that use the
library are named sooner by their own guarded end (runtime/end_guard.py), within the
same deadline less a margin.

Standard library only: the launcher must not initialise MPI.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time

from .rank_entry import end_path, pid_path, status_path

POLL_S = 0.1
# past the deadline, mpiexec gets SIGTERM and this long to end the ranks before SIGKILL
TERMINATE_GRACE_S = 3.0


def process_state(pid: int) -> str:
    """The state letter in /proc ("T": stopped, "Z": ended, not reaped), "" when gone."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""


class RankWatch:
    """The ranks of one job: their pids, how the first to end ended, the deadline."""

    def __init__(self, directory: str, n: int, deadline_s: float):
        self.directory, self.n, self.deadline_s = directory, n, deadline_s
        self.first_end = None   # (time, rank) when a rank's script first returned
        self.overdue = []       # (rank, state) of the ranks late at the deadline
        self.deadline_passed = False

    def pids(self, rank: int):
        """(pid, host, supervisor pid) rank_entry.py wrote at the rank's start, or None."""
        try:
            with open(pid_path(self.directory, rank)) as file:
                pid, host, supervisor = file.read().split()
            return int(pid), host, int(supervisor)
        except (OSError, ValueError):
            return None

    def look(self):
        """Note when a rank's script first returned."""
        if self.first_end is None:
            for rank in range(self.n):
                if os.path.exists(end_path(self.directory, rank)):
                    self.first_end = (time.monotonic(), rank)
                    break

    def late_ranks(self) -> list:
        return [rank for rank in range(self.n)
                if not os.path.exists(end_path(self.directory, rank))]

    def follow(self, proc) -> int:
        """Wait for the launcher process `proc` (mpiexec, srun) watching the ranks; return
        its exit code."""
        while True:
            try:
                if proc.poll() is not None:
                    return proc.returncode
                self.look()
                if (self.first_end is not None and not self.deadline_passed
                        and time.monotonic() - self.first_end[0] > self.deadline_s):
                    self.deadline_passed = True
                    self.end_overdue_job(proc)
                time.sleep(POLL_S)
            except KeyboardInterrupt:     # forwarded by the signal handler; keep waiting
                continue

    def end_overdue_job(self, proc):
        """The deadline after the first script's end passed: note who is late, end it."""
        late = self.late_ranks()
        if not late:
            return
        host = socket.gethostname()      # a pid of another host means nothing here
        local = {rank: ids for rank in late
                 if (ids := self.pids(rank)) is not None and ids[1] == host}
        self.overdue = [(rank, process_state(local[rank][0]) if rank in local else "?")
                        for rank in late]
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(TERMINATE_GRACE_S)
        except (subprocess.TimeoutExpired, KeyboardInterrupt):
            proc.kill()
        for ids in filter(None, local.values()):   # a stopped rank ignores SIGTERM
            try:
                os.kill(ids[0], signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def describe(self, rank: int) -> str:
        ids = self.pids(rank)
        return f"rank {rank} (pid {ids[0]} on {ids[1]})" if ids else f"rank {rank}"

    def ended_first(self) -> list:
        """(rank, how it ended) from the supervisors' status files."""
        found = []
        for rank in range(self.n):
            try:
                with open(status_path(self.directory, rank)) as file:
                    found.append((rank, file.read().strip()))
            except OSError:
                continue
        return found

    def report(self) -> list:
        """The lines that name the rank(s) behind a failure."""
        lines = []
        if self.overdue:
            states = {"T": "stopped", "t": "stopped", "": "gone", "?": "on another host"}
            late = ", ".join(f"{self.describe(rank)}: {states.get(state, 'still running')}"
                             for rank, state in self.overdue)
            lines.append(f"{late}: did not reach the end of the program within "
                         f"{self.deadline_s:g} s after rank {self.first_end[1]} reached its "
                         "end (a stopped or hung rank); the launcher ended the job")
        ended = self.ended_first()
        for rank, how in ended:
            lines.append(f"{self.describe(rank)} {how}, before the job ended"
                         + (": the first rank to end; mpiexec then ended the others (the "
                            "pid it names may be one of those)" if len(ended) == 1 else ""))
        return lines
