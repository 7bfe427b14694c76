"""Per-rank CPU thread budget and GPU selection.

Layer: runtime. This module may import mpi4py, numpy, threadpoolctl and numba;
it never imports cupy (GPU selection here is pure arithmetic on rank numbers).

Rules (see docs/launching.md):

* Every rank on a node gets an equal share of the node's usable cores:
  ``max(1, usable cores // ranks on this node)`` threads for BLAS (through
  threadpoolctl) and for numba's parallel kernels, so that the ranks never
  oversubscribe the node by default.
* The environment variable ``NNTILE_SPMD_THREADS`` (set by
  ``python -m nntile_spmd.launch``) overrides that default.
* A rank's threads are split between tile tasks run side by side by the
  executor and BLAS threads inside each task: task threads × BLAS threads ≤
  the rank's threads (``split_threads``). ``NNTILE_SPMD_TASK_THREADS`` (or
  ``nt.compile(task_threads=...)``) sets the task threads; 1 is the serial
  executor.
* A rank uses GPU ``local_rank % n_gpus`` of the GPUs it can see.

The functions taking ``comm`` split it by shared memory and are therefore
collective: every rank of ``comm`` must call them.
"""

import os

import threadpoolctl
from mpi4py import MPI

from .thread_budget import (TASK_THREADS_ENV, THREADS_ENV, chosen_task_threads,  # noqa: F401
                            split_threads, threads_from_env)

# The active threadpoolctl limiter; kept so that the limit stays in effect.
_BLAS_LIMITER = None
_BLAS_THREADS = None    # the limit it set


def _node_comm(comm):
    """Return the sub-communicator of the ranks of ``comm`` on this node."""
    return comm.Split_type(MPI.COMM_TYPE_SHARED)


def _usable_cpus():
    """Return the set of CPU ids this process may run on."""
    try:
        return set(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return set(range(os.cpu_count() or 1))


def usable_cores():
    """Return how many cores this process may run on."""
    return len(_usable_cpus())


def ranks_per_node(comm):
    """Return how many ranks of ``comm`` share this node (collective)."""
    node = _node_comm(comm)
    try:
        return node.Get_size()
    finally:
        node.Free()


def local_rank(comm):
    """Return the rank of this process among the ranks of ``comm`` on its node."""
    node = _node_comm(comm)
    try:
        return node.Get_rank()
    finally:
        node.Free()


def ranks_outnumber_cores(comm):
    """True if this node has more ranks of ``comm`` than usable cores (collective;
    the cores as in :func:`default_blas_threads`)."""
    node = _node_comm(comm)
    try:
        masks = node.allgather(_usable_cpus())
        return node.Get_size() > len(set().union(*masks))
    finally:
        node.Free()


def default_blas_threads(comm):
    """Return max(1, usable cores on this node // ranks of ``comm`` on it) (collective).

    The usable cores are the union of the CPU affinity masks of the ranks on
    the node: unbound ranks share the whole mask, while ranks that a launcher
    already pinned to disjoint cores (``srun --cpu-bind=cores``) each get their
    own cores.
    """
    node = _node_comm(comm)
    try:
        masks = node.allgather(_usable_cpus())
        return max(1, len(set().union(*masks)) // node.Get_size())
    finally:
        node.Free()


def configure_rank_threads(comm, threads=None, task_threads=None):
    """Budget this rank's threads; return (task threads, rank threads) (collective).

    The rank's threads come from the ``threads`` argument, then
    ``NNTILE_SPMD_THREADS``, then :func:`default_blas_threads`. With task threads
    chosen (argument or ``NNTILE_SPMD_TASK_THREADS``) they are split by
    :func:`split_threads` and BLAS and numba limited to the BLAS share; without,
    task threads are None (the default: tasks one at a time, thread_budget.py) and
    BLAS gets every thread.
    """
    default = default_blas_threads(comm)  # always called: keeps this collective
    if threads is None:
        threads = threads_from_env() or default
    threads = int(threads)
    if threads < 1:
        raise ValueError(f"threads must be positive, got {threads}")
    task_threads = chosen_task_threads(task_threads)
    if task_threads is None:
        limit_blas_threads(threads)
        return None, threads
    task_threads, blas_threads = split_threads(threads, task_threads)
    limit_blas_threads(blas_threads)
    return task_threads, threads


def configure_blas_threads(comm, threads=None):
    """Limit BLAS and numba threads of this rank and return the count used (collective).

    Priority: the ``threads`` argument, then ``NNTILE_SPMD_THREADS``, then
    :func:`default_blas_threads`.
    """
    default = default_blas_threads(comm)  # always called: keeps this collective
    if threads is None:
        threads = threads_from_env() or default
    threads = int(threads)
    if threads < 1:
        raise ValueError(f"threads must be positive, got {threads}")
    limit_blas_threads(threads)
    return threads


def limit_blas_threads(threads):
    """Limit BLAS (threadpoolctl) and numba's parallel kernels to `threads`."""
    global _BLAS_LIMITER, _BLAS_THREADS
    _BLAS_LIMITER = threadpoolctl.threadpool_limits(limits=threads, user_api="blas")
    _BLAS_THREADS = threads
    _set_numba_threads(threads)
    return threads


def ensure_blas_threads(threads):
    """limit_blas_threads unless that limit is already set by it (cheap per execute)."""
    if threads != _BLAS_THREADS:
        limit_blas_threads(threads)


def _set_numba_threads(threads):
    """Set numba's thread count, capped by its pool size NUMBA_NUM_THREADS."""
    import numba  # imported lazily: numba is slow to import

    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))


def gpu_for_rank(local_rank, n_gpus):
    """Return the GPU index a rank uses: ``local_rank % n_gpus``."""
    if n_gpus < 1:
        raise ValueError(f"n_gpus must be positive, got {n_gpus}")
    return local_rank % n_gpus
