"""train_gpt2.py's presets under real MPI follow one process's loss curve (fp64, 1e-9):
    mpiexec -n 2 python -m pytest --with-mpi -p no:cacheprovider tests/train/test_train_gpt2_mpi.py
Every rank checks its part, then the ranks agree on one verdict (no rank is left waiting).
"""

import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import arrive_asleep

mpi4py = pytest.importorskip("mpi4py")
from mpi4py import MPI  # noqa: E402

import nntile_spmd as nt  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
import gpt2_corpus as corpus  # noqa: E402
import train_gpt2  # noqa: E402

STEPS = 4
# 3 heads on 2 ranks and n_embd 12 split unevenly under tp; 2 layers so that a block's
# output feeds another block under every preset
TINY = ["--n-layer", "2", "--n-embd", "12", "--n-head", "3", "--seq", "8", "--batch", "4",
        "--steps", str(STEPS), "--warmup", "2", "--lr", "3e-2", "--dtype", "fp64"]


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


def loss_curve(strategy, comm):
    args = train_gpt2.parse_args(TINY + ["--strategy", strategy])
    trainer = train_gpt2.make_trainer(args, comm)
    stream = np.tile(np.array([3, 1, 4, 1, 5, 9, 2, 6]), 500)   # learnable in a few steps
    losses = []
    for step in range(STEPS):
        ids, targets = corpus.train_batch(stream, args.seed, step, args.seq, args.batch)
        losses.append(trainer.train_step([{"input_ids": ids, "targets": targets}]))
    return np.array(losses), trainer


@pytest.mark.mpi(min_size=2)
def test_presets_agree_with_one_process_in_fp64():
    comm = MPI.COMM_WORLD
    reference, _ = loss_curve("single", nt.SimulatedWorld(1))
    curves, sent = {}, {}
    for strategy in ("single", "ddp", "fsdp", "tp"):
        curves[strategy], trainer = loss_curve(strategy, comm)
        sent[strategy] = train_gpt2.measured(trainer)["bytes_sent_per_step"]

    def check():
        assert reference[-1] < reference[0], reference    # it trains
        for strategy, losses in curves.items():
            np.testing.assert_allclose(losses, reference, rtol=1e-9, err_msg=strategy)
        assert all(sent[s] > 0 for s in ("ddp", "fsdp", "tp")), sent   # really distributed

    collective_verdict(comm, check)
