"""Runtime layer: PlanningWorld, one rank of a job of any size, for planning only.

No MPI, no tiles, no execution: `nt.compile(g, comm=nt.PlanningWorld(1024, 5))`
derives rank 5's program alone, so its memory, traffic and FLOPs can be read
before anyone books the 1,024 ranks.
"""

from __future__ import annotations

from .device import Device, select_device
from .device_choice import resolve_device
from .thread_budget import TaskThreads, simulated_task_threads
from .world import refuse_unless_executing


class PlanningWorld:
    """Rank `rank` of a `size`-rank world; pass as `comm=` to nt.compile."""

    runs_every_rank = False
    executes = False
    cuda_aware = False

    def __init__(self, size: int, rank: int = 0):
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"PlanningWorld needs a size >= 1, got {size!r}")
        if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < size:
            raise ValueError(f"PlanningWorld({size}): rank must be in 0..{size - 1}, "
                             f"got {rank!r}")
        self.size, self.rank = size, rank
        self.where = "compile"

    def __repr__(self) -> str:
        return f"PlanningWorld({self.size}, rank={self.rank})"

    def local_ranks(self):
        return ()    # no tiles here: the rank's shard of a large job need not fit this machine

    def setup_node(self, device, threads, task_threads, gpus=None):
        # a GPU job is planned on any machine: its device is a name with no arrays
        if isinstance(device, str) and resolve_device(device) == "cuda":
            selected = Device("cuda", None, {})
        else:
            selected = select_device(device, 0)
        return selected, TaskThreads(simulated_task_threads(task_threads))

    def transport(self, rank, epoch=0):
        refuse_unless_executing(self, "execute")

    def run(self, executors: dict):
        refuse_unless_executing(self, "execute")

    def fetch_tile(self, stores, key, owner, root, tile_shape_dtype):
        refuse_unless_executing(self, "get_output")

    def agree(self, value, what=None):
        """Every rank derives the same plan by construction; there is nobody to ask."""
        return [value] * self.size

    def check_fingerprint(self, values, what):
        return [values] * self.size
