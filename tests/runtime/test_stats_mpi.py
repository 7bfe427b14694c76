"""get_stats() on real MPI ranks: bytes from the buffers handed to Isend and the
Status counts of Irecv, so a corrupted tile shows up on both sides.

    mpiexec -n 2 python -m pytest --with-mpi -p no:cacheprovider tests/runtime/test_stats_mpi.py
"""

import pytest
from helpers import collective_ok, guarded
from mpi4py import MPI
from test_stats import sent_once, shrink_tile

pytestmark = pytest.mark.mpi(min_size=2)
COMM = MPI.COMM_WORLD


def test_shrunk_tile_is_measured_on_both_sides():
    """Rank 1 sends x[1] to rank 0; shrunk to one element on rank 1, both ranks
    measure 4 bytes where the plan says 8 (and rank 1's peak drops by 4)."""
    expected = {0: {"bytes_received": (8, 4), "bytes_transferred": (0, 0)},
                1: {"bytes_transferred": (8, 4), "peak_bytes": (8, 4)}}

    def check():
        cg = sent_once(None)
        cg.execute()
        problems = [f"clean run: {field} {pair}" for field, pair in cg.stats_vs_plan().items()
                    if pair[0] != pair[1]]
        if COMM.rank == 1:
            shrink_tile(cg, 1, ("x", (1,)), 1)
        cg.execute()
        versus = cg.stats_vs_plan()
        for field, pair in expected.get(COMM.rank, {}).items():
            if versus[field] != pair:
                problems.append(f"rank {COMM.rank}: {field} {versus[field]}, expected {pair}")
        return problems
    problems = guarded(check)
    assert collective_ok(COMM, not problems), problems
