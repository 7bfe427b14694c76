"""Fusion on real MPI ranks: the fused GPT-2 training step (fp64, uneven tiles) gives
bitwise the unfused results on every rank under every preset; verdicts are collective.

    mpiexec -n 3 python -m pytest --with-mpi -p no:cacheprovider tests/plan/test_fusion_mpi.py
"""

import numpy as np
import pytest
from helpers import collective_ok, guarded
from mpi4py import MPI

import nntile_spmd as nt
from nntile_spmd.models import gpt2
from nntile_spmd.train import add_optimizer

pytestmark = pytest.mark.mpi(min_size=2)
COMM = MPI.COMM_WORLD


def gpt2_results(preset, fuse):
    cfg = gpt2.GPT2Config(vocab_size=32, n_positions=12, n_embd=16, n_layer=2, n_head=2)
    model = gpt2.build_gpt2(cfg, batch=3, seq=12, dtype="fp64")
    add_optimizer(model.graph, model.params, model.grads, "adamw", lr=1e-3, weight_decay=0.01)
    cg = nt.compile(model.graph, distribution=preset, fuse=fuse,
                    tiling=nt.TilingStrategy.manual({"input_ids": [5, 2]}))
    rng = np.random.default_rng(1)
    for name, value in model.init_params(rng).items():
        cg.bind_data(name, value)
    ids = np.asfortranarray(rng.integers(0, 32, (12, 3)))
    cg.bind_data("input_ids", ids)
    cg.bind_data("targets", ids)
    for _ in range(2):
        cg.execute()
    cg.check_stats()
    return {name: cg.get_output(name) for name in [p.name for p in model.params] + ["loss"]}


@pytest.mark.parametrize("preset", ["single", "ddp", "fsdp", "tp"])
def test_fused_gpt2_step_is_bitwise_the_unfused_one_on_mpi_ranks(preset):
    def check():
        unfused, fused = gpt2_results(preset, False), gpt2_results(preset, True)
        return [f"rank {COMM.rank}: {name} differs" for name, value in unfused.items()
                if not np.array_equal(value, fused[name])]
    problems = guarded(check)
    assert collective_ok(COMM, not problems), problems
