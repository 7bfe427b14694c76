"""Trainer.fit checks that every rank has the same seed and dataset shapes (one
allgather per fit) and raises on every rank if not.

    mpiexec -n 2 python -m pytest --with-mpi -p no:cacheprovider tests/train/test_agreement_mpi.py
"""

import numpy as np
import pytest
from test_mpi import collective_verdict
from train_helpers import make_trainer

from mpi4py import MPI  # noqa: I001

COMM = MPI.COMM_WORLD
LAST = COMM.size - 1


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("differs", ["seed", "dataset size"])
def test_a_rank_with_other_seed_or_data_raises_everywhere(data, differs):
    seed = 1 if differs == "seed" and COMM.rank == LAST else 0
    local = dict(data)
    if differs == "dataset size" and COMM.rank == LAST:
        local = {name: np.asfortranarray(array[..., :-12]) for name, array in data.items()}
    trainer = make_trainer(comm=COMM, distribution="ddp", seed=seed)

    def check():
        with pytest.raises(ValueError, match="the seed and the dataset shapes must be the same "
                           f"on every rank: rank 0 has .*, rank {LAST} has"):
            trainer.fit(local, 1)

    collective_verdict(COMM, check)
