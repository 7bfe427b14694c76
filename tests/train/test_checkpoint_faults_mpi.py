"""A damaged checkpoint read by one rank only raises one CheckpointError on every rank.

    mpiexec -n 2 python -m pytest --with-mpi -p no:cacheprovider \\
        tests/train/test_checkpoint_faults_mpi.py        (and -n 3)
"""

import shutil

import pytest
from test_mpi import collective_verdict, shared_directory
from test_resume import DAMAGES, damage
from train_helpers import make_trainer

from mpi4py import MPI  # noqa: I001 - pytest-mpi runs this under mpiexec
from nntile_spmd.train import CheckpointError, load_checkpoint, save_checkpoint

COMM = MPI.COMM_WORLD


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("kind", DAMAGES)
def test_damage_raises_the_same_error_on_every_rank(data, kind):
    directory = shared_directory(COMM)
    try:
        trainer = make_trainer(comm=COMM, distribution="fsdp")
        trainer.fit(data, 1)
        save_checkpoint(trainer.cg, directory, step=1)
        COMM.Barrier()
        if COMM.rank == 0:
            damage(kind, directory)      # the last shard: a tile only the last rank reads
        COMM.Barrier()
        target = make_trainer(comm=COMM, distribution="fsdp")

        def check():
            with pytest.raises(CheckpointError, match=DAMAGES[kind]):
                load_checkpoint(target.cg, directory)

        collective_verdict(COMM, check)
    finally:
        COMM.Barrier()
        if COMM.rank == 0:
            shutil.rmtree(directory, ignore_errors=True)
