"""Runtime layer: how a rank's threads are split between tile tasks and BLAS.

Pure arithmetic on counts and environment variables (no mpi4py, no numba), so a
SimulatedWorld can read the same settings as an MPI rank. runtime/threads.py
applies the split to BLAS and numba on real ranks.
"""

from __future__ import annotations

import os

from ..plan.instructions import Exec

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


def auto_task_threads(program, threads, heavy_flops=HEAVY_FLOPS):
    """Task threads for `program` when the user chose none: all `threads` if its
    heavy tasks (>= `heavy_flops`) number at least `threads` per op on average,
    else 1. A program of whole, untiled tensors has one task per op: running it
    serially with BLAS on every thread beats tasks side by side that do not exist."""
    if threads <= 1:
        return 1
    tasks, ops = 0, set()
    for instruction in program:
        if type(instruction) is Exec and instruction.flops >= heavy_flops:
            tasks += 1
            ops.add(instruction[6])
    return threads if tasks >= threads * max(1, len(ops)) else 1


def simulated_task_threads(task_threads=None):
    """A SimulatedWorld's task threads: the argument, the variable, else 1 (serial)."""
    if task_threads is None:
        task_threads = threads_from_env(TASK_THREADS_ENV)
    if task_threads is not None and int(task_threads) < 1:
        raise ValueError(f"task_threads must be positive, got {task_threads}")
    return int(task_threads or 1)


class TaskThreads:
    """A compiled graph's task threads on one process: fixed, or chosen per program.

    `fixed` None means automatic: auto_task_threads per (phases, rank) program, and
    `set_blas(rank_threads // chosen)` before the execute (an MPI rank's BLAS limit).
    """

    def __init__(self, fixed, rank_threads=1, set_blas=None):
        self.fixed, self.rank_threads, self.set_blas = fixed, rank_threads, set_blas
        self.chosen = {}
        self.last = fixed or 1      # what the last execute used

    def for_program(self, key, program) -> int:
        threads = self.fixed
        if threads is None:
            threads = self.chosen.get(key)
            if threads is None:
                threads = self.chosen[key] = auto_task_threads(program, self.rank_threads)
            self.set_blas(max(1, self.rank_threads // threads))
        self.last = threads
        return threads
