"""Runtime layer: PlanningWorld, one rank of a job of any size, for planning only.

No MPI, no tiles, no execution: `nt.compile(g, comm=nt.PlanningWorld(1024, 5))`
derives rank 5's program alone, so its memory, traffic and FLOPs can be read
before anyone books the 1,024 ranks (DESIGN.md section 4.3).
"""

from __future__ import annotations


class PlanningWorld:
    """Rank `rank` of a `size`-rank world; pass as `comm=` to nt.compile."""

    def __init__(self, size: int, rank: int = 0):
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"PlanningWorld needs a size >= 1, got {size!r}")
        if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < size:
            raise ValueError(f"PlanningWorld({size}): rank must be in 0..{size - 1}, "
                             f"got {rank!r}")
        self.size, self.rank = size, rank

    def __repr__(self) -> str:
        return f"PlanningWorld({self.size}, rank={self.rank})"

    def local_ranks(self):
        return (self.rank,)

    def refuse(self, what: str):
        raise RuntimeError(f"{what}: {self!r} only plans; compile on MPI ranks (comm=None "
                           f"under mpiexec) or on nt.SimulatedWorld(n) to run the plan")

    def transport(self, rank):
        self.refuse("execute")

    def run(self, executors: dict):
        self.refuse("execute")

    def fetch_tile(self, stores, key, owner, root, tile_shape_dtype):
        self.refuse("get_output")

    def agree(self, value):
        """Every rank derives the same plan by construction; there is nobody to ask."""
        return [value] * self.size

    def all_true(self, flag: bool) -> bool:
        return bool(flag)
