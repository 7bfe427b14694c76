"""Runtime layer: how a rank's threads are split between tile tasks and BLAS.

Pure arithmetic on counts and environment variables (no mpi4py, no numba), so a
SimulatedWorld can read the same settings as an MPI rank. runtime/threads.py
applies the split to BLAS and numba on real ranks.
"""

from __future__ import annotations

import os


# A task of at least this many FLOPs is worth a worker thread (executor_threads.py).
HEAVY_FLOPS = 1 << 16

THREADS_ENV = "NNTILE_SPMD_THREADS"
TASK_THREADS_ENV = "NNTILE_SPMD_TASK_THREADS"


def threads_from_env(name=THREADS_ENV):
    """Return the thread count from the variable `name`, or None if unset."""
    value = os.environ.get(name, "").strip()
    if not value:
        return None
    try:
        threads = int(value)
    except ValueError:
        threads = 0
    if threads < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return threads


def split_threads(threads, task_threads=None):
    """(task threads, BLAS threads per task) for a rank of `threads` threads.

    Priority for the task threads: the argument, then ``NNTILE_SPMD_TASK_THREADS``,
    then all of the rank's threads (each task's BLAS then runs on one thread, so
    tile tasks side by side use the cores; small tiles leave a multi-threaded BLAS
    call idle half the time). Never more than `threads`: the product of the two
    stays within the rank's share of the node.
    """
    if task_threads is None:
        task_threads = chosen_task_threads() or threads
    task_threads = int(task_threads)
    if task_threads < 1:
        raise ValueError(f"task_threads must be positive, got {task_threads}")
    task_threads = min(task_threads, threads)
    return task_threads, max(1, threads // task_threads)


def chosen_task_threads(task_threads=None):
    """The task threads the user chose (argument, then variable), or None: automatic."""
    if task_threads is None:
        task_threads = threads_from_env(TASK_THREADS_ENV)
    if task_threads is not None and int(task_threads) < 1:
        raise ValueError(f"task_threads must be positive, got {task_threads}")
    return None if task_threads is None else int(task_threads)


def simulated_task_threads(task_threads=None):
    """A SimulatedWorld's task threads: the argument, the variable, else 1 (serial)."""
    if task_threads is None:
        task_threads = threads_from_env(TASK_THREADS_ENV)
    if task_threads is not None and int(task_threads) < 1:
        raise ValueError(f"task_threads must be positive, got {task_threads}")
    return int(task_threads or 1)


class TaskThreads:
    """A compiled graph's task threads on one process: fixed, or chosen per execute.

    `fixed` None means automatic, by a measured rule (rank_threads > 1 only): while
    the rank's cores are its own, tasks run one at a time and `set_blas(rank_threads)`
    lets each task's BLAS use them all; once other processes keep so many cores busy
    that fewer than `rank_threads` are left (core_share.py measures it between
    executes), the rank's threads run tile tasks side by side with one BLAS thread
    each: a multi-threaded BLAS call waits at its barrier for a thread that lost its
    core, tasks do not wait for each other (docs/benchmarks.md#threads-inside-a-rank
    has both ways timed). Results are bitwise the same either way (tests/runtime).
    """

    def __init__(self, fixed, rank_threads=1, set_blas=None, core_share=None):
        self.fixed, self.rank_threads, self.set_blas = fixed, rank_threads, set_blas
        self.last = fixed or 1      # what the last execute used
        self.core_share = core_share
        if fixed is None and rank_threads > 1 and core_share is None:
            from .core_share import CoreShare
            self.core_share = CoreShare()
        self.contended = False      # the last measurement left the rank short of cores

    def for_program(self, key, program) -> int:
        threads = self.fixed
        if threads is None:
            threads = self.rank_threads if self.short_of_cores() else 1
            self.set_blas(1 if threads > 1 else self.rank_threads)
        self.last = threads
        return threads

    def short_of_cores(self) -> bool:
        """Whether other processes leave this rank fewer cores than its threads."""
        if self.rank_threads < 2:
            return False
        others = self.core_share.others_busy_cores()
        if others is not None:       # else too short a time to tell: keep the last verdict
            cores = self.core_share.last[2]
            self.contended = cores - others < self.rank_threads - CORE_MARGIN
        return self.contended


# Free cores the rank may lack before its BLAS threads count as contended: jiffies
# and short-lived neighbours (a shell, the MPI progress of another rank) blur the
# measurement by a few tenths of a core.
CORE_MARGIN = 0.5
