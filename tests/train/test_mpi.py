"""Multi-rank tests under real MPI: run with
    mpiexec -n 2 python -m pytest --with-mpi -p no:cacheprovider tests/train/test_mpi.py
Every rank checks its part, then the ranks agree on one verdict (no rank is left waiting).
"""

import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest
from helpers import arrive_asleep
from train_helpers import make_trainer

mpi4py = pytest.importorskip("mpi4py")
from mpi4py import MPI  # noqa: E402

from nntile_spmd.train import export_safetensors, import_safetensors  # noqa: E402


def collective_verdict(comm, check):
    """Run check() on every rank; raise on every rank if any rank failed."""
    try:
        check()
        failure = None
    except Exception as exc:   # reported collectively
        failure = f"rank {comm.rank}: {exc!r}"
    arrive_asleep(comm)
    failures = [f for f in comm.allgather(failure) if f]
    assert not failures, "; ".join(failures)


def shared_directory(comm) -> Path:
    path = tempfile.mkdtemp(prefix="nntile_ckpt_") if comm.rank == 0 else None
    return Path(comm.bcast(path, root=0))


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("distribution", ["ddp", "fsdp", "tp"])
def test_mpi_loss_curve_matches_one_process(distribution, data):
    comm = MPI.COMM_WORLD
    losses = make_trainer(comm=comm, distribution=distribution).fit(data, 3)
    reference = make_trainer(1, "single").fit(data, 3)
    collective_verdict(comm, lambda: np.testing.assert_allclose(losses, reference, rtol=1e-10))


@pytest.mark.mpi(min_size=2)
def test_mpi_fsdp_checkpoint_resumes_under_ddp_and_in_simulation(data):
    comm = MPI.COMM_WORLD
    directory = shared_directory(comm)
    try:
        source = make_trainer(comm=comm, distribution="fsdp")
        source.fit(data, 2)
        source.save(directory)
        expected = source.fit(data, 2)
        export_safetensors(source.cg, directory / "model.safetensors")
        params = source.get_params()
        target = make_trainer(comm=comm, distribution="ddp")
        target.load(directory)
        resumed = target.fit(data, 2)
        simulated = make_trainer(3, "tp")      # every rank reads the MPI ranks' shards
        simulated.load(directory)
        replay = simulated.fit(data, 2)
        imported = make_trainer(comm=comm, distribution="tp")
        import_safetensors(imported.cg, directory / "model.safetensors")
        loaded = imported.get_params()

        def check():
            assert target.step == 4
            np.testing.assert_allclose(resumed, expected, rtol=1e-12)
            np.testing.assert_allclose(replay, expected, rtol=1e-12)
            for name, value in params.items():
                np.testing.assert_array_equal(loaded[name], value)

        collective_verdict(comm, check)
    finally:
        comm.Barrier()
        if comm.rank == 0:
            shutil.rmtree(directory, ignore_errors=True)
