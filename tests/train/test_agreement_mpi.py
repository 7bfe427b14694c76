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


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("mesh", [None, {"dp": 2, "tp": 2}, {"fsdp": 2, "tp": 2}],
                         ids=["tp", "dp x tp", "fsdp x tp"])
def test_a_rank_given_other_data_than_its_tp_partner_raises_everywhere(data, mesh):
    """The last rank's batch differs in value only (same shapes, same seed). Under a mesh
    its tp partner holds the same batch tiles, which no other rank holds: before, only
    tiles every rank holds were compared, and every rank trained on, agreeing on wrong
    parameters."""
    if mesh is not None and COMM.size != 4:
        pytest.skip("a 2 x 2 mesh needs 4 ranks")
    local = dict(data)
    if COMM.rank == LAST:
        local["x"] = np.asfortranarray(data["x"] + 1.0)
    trainer = make_trainer(comm=COMM, distribution=mesh or "tp")

    def check():
        with pytest.raises(ValueError, match=r"bind_tiles x: tiles that several ranks hold "
                           rf"were given different values: rank\(s\) \[{LAST}\] differ from "
                           r"rank \d+ in the tiles (every rank holds|ranks \[\d+, \d+\] hold)"):
            trainer.fit(local, 1)

    collective_verdict(COMM, check)
