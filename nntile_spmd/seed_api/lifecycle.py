"""Seed API: nntile.init(mpi=True) and nntile.shutdown() (seed §4.1.1, §5.2)."""

from __future__ import annotations

from .asynchronous import LIVE_RUNNERS


def init(mpi: bool = True) -> None:
    """Start MPI now (mpi4py initialises it with MPI_THREAD_MULTIPLE on import); with
    mpi=False nothing is started and graphs need comm=nt.SimulatedWorld(n)."""
    if mpi:
        from mpi4py import MPI   # noqa: F401 - importing initialises MPI


def shutdown() -> None:
    """Wait for every program started by execute_async; MPI ends at process exit."""
    for runner in list(LIVE_RUNNERS):
        runner.wait_all()
