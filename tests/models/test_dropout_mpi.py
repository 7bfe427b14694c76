"""Dropout on real MPI ranks draws the masks one process draws (a function of the
element's index, not of the rank or tiling): a tiny GPT-2's training losses under fsdp and
tp equal a one-process reference's.
    mpiexec -n 2 python -m pytest --with-mpi -p no:cacheprovider tests/models/test_dropout_mpi.py
"""

import numpy as np
import pytest
from dropout_helpers import train

import nntile_spmd as nt
from tests.helpers import assert_no_rank_has_problems, guarded

mpi4py = pytest.importorskip("mpi4py")
from mpi4py import MPI  # noqa: E402


@pytest.fixture(scope="module")
def reference():
    return train(comm=nt.SimulatedWorld(1))[0]


def problems(reference, distribution):
    losses, _, _ = train(comm=MPI.COMM_WORLD, distribution=distribution,
                         tiles={"input_ids": [5, 2]})
    return [] if np.allclose(losses, reference, rtol=1e-12, atol=0) else \
        [f"{distribution}: losses {losses} != one process's {reference}"]


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("distribution", ["fsdp", "tp"])
def test_dropout_on_ranks_equals_one_process(reference, distribution):
    comm = MPI.COMM_WORLD
    found = guarded(problems, reference, distribution)
    assert_no_rank_has_problems(comm, found)
