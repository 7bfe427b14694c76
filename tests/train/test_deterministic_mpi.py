"""deterministic=True on real MPI ranks (own processes, own BLAS thread counts): bitwise
the result of one simulated rank, under every preset.

    mpiexec -n 2 python -m pytest --with-mpi -p no:cacheprovider \\
        tests/train/test_deterministic_mpi.py        (and -n 3, -n 4)
"""

import pytest
from test_deterministic import PRESETS, differing, train
from test_mpi import collective_verdict

from mpi4py import MPI  # noqa: I001
import nntile_spmd as nt

COMM = MPI.COMM_WORLD


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("preset", PRESETS)
def test_mpi_ranks_match_one_rank_bitwise(preset):
    reference = train(nt.SimulatedWorld(1), "single", True)
    result = train(COMM, preset, True)

    def check():
        assert differing(result, reference) == []

    collective_verdict(COMM, check)
