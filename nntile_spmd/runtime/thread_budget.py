"""Runtime layer: how a rank's threads are split between tile tasks and BLAS.

Pure arithmetic on counts and environment variables (no mpi4py, no numba), so a
SimulatedWorld can read the same settings as an MPI rank. runtime/threads.py
applies the split to BLAS and numba on real ranks.
"""

from __future__ import annotations

import os

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
        task_threads = threads_from_env(TASK_THREADS_ENV) or threads
    task_threads = int(task_threads)
    if task_threads < 1:
        raise ValueError(f"task_threads must be positive, got {task_threads}")
    task_threads = min(task_threads, threads)
    return task_threads, max(1, threads // task_threads)


def simulated_task_threads(task_threads=None):
    """A SimulatedWorld's task threads: the argument, the variable, else 1 (serial)."""
    if task_threads is None:
        task_threads = threads_from_env(TASK_THREADS_ENV)
    if task_threads is not None and int(task_threads) < 1:
        raise ValueError(f"task_threads must be positive, got {task_threads}")
    return int(task_threads or 1)
