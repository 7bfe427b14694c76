"""Runtime layer: the World protocol, what a CompiledGraph needs from the ranks it runs on.

Three worlds implement it: MPIWorld (this process is one rank of an MPI job),
SimulatedWorld (every rank's program runs inside this process) and PlanningWorld
(one rank of a job of any size, planned but never run). The runtime and the
trainer talk to a world only through these members, never through its class.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable
from collections.abc import Sequence


@runtime_checkable
class World(Protocol):
    size: int
    rank: int                 # the rank whose view get_stats() and checkpoints report
    runs_every_rank: bool     # True: this process derives and runs every rank's program
    executes: bool            # False: plans only (execute and get_output refuse)
    cuda_aware: bool          # True: tile transfers may hand device buffers to MPI
    where: str                # what the ranks are doing, for timeout messages

    def local_ranks(self) -> Sequence[int]:
        """The ranks whose tiles this process holds and whose programs it runs."""

    def setup_node(self, device: str, threads, task_threads, gpus=None):
        """Select this process's device (a GPU among `gpus`, ExecutionPolicy's
        preferred_gpus) and budget its threads (BLAS threads and tile tasks side by
        side); returns (Device, TaskThreads)."""

    def transport(self, rank: int, epoch: int = 0):
        """The tile transport of `rank` for execute number `epoch`."""

    def run(self, executors: dict) -> None:
        """Run the RankExecutors of local_ranks() to completion."""

    def fetch_tile(self, stores, key, owner, root, tile_shape_dtype):
        """Tile `key` (owned by `owner`) on every rank, or on `root` only."""

    def agree(self, value, what: str = ...) -> list:
        """Every rank's `value` (small picklable objects), in rank order."""

    def check_fingerprint(self, values, what: str):
        """Every rank's int64 vector `values`, as a (size, len) array-like."""


def refuse_unless_executing(world: World, what: str) -> None:
    """Raise if `world` only plans: there are no tiles to run or read."""
    if not world.executes:
        raise RuntimeError(f"{what}: {world!r} only plans; compile on MPI ranks (comm=None "
                           f"under mpiexec) or on nt.SimulatedWorld(n) to run the plan")
