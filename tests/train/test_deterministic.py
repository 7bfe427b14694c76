"""nt.compile(..., deterministic=True): the MLP in fp32 trains bitwise identically on
1-4 ranks under every preset for one tile grid (single process: simulated ranks;
test_deterministic_mpi.py checks real ranks)."""

import itertools

import numpy as np
import pytest

import nntile_spmd as nt
from nntile_spmd.models import build_mlp
from nntile_spmd.train import Trainer

SIZES, BATCH = [64, 96, 10], 48
TILES = {"x": [16, 12], "w1": [32, 16], "w2": [10, 32]}   # 4 x 6 tiles to sum over
PRESETS = ("single", "ddp", "fsdp", "tp")


def fp32_data():
    rng = np.random.default_rng(1)
    return {"x": np.asfortranarray(rng.standard_normal((SIZES[0], 96)).astype(np.float32)),
            "y": rng.integers(0, SIZES[-1], 96).astype(np.int64)}


def train(comm, preset, deterministic, steps=3):
    """(losses, parameters) after `steps` Adam steps of the fp32 MLP."""
    model = build_mlp(SIZES, BATCH, dtype="fp32")
    trainer = Trainer(model, "adam", comm=comm, distribution=preset, progress=False,
                      tiling=nt.TilingStrategy.manual(TILES), lr=1e-2,
                      compile_args={"deterministic": deterministic})
    trainer.bind_params(model.init_params(np.random.default_rng(0)))
    losses = trainer.fit(fp32_data(), steps)
    return losses, trainer.get_params()


def differing(result, reference) -> list:
    losses, params = result
    return ([] if losses == reference[0] else ["losses"]) + \
        [name for name in params if not np.array_equal(params[name], reference[1][name])]


@pytest.fixture(scope="module")
def reference():
    return train(nt.SimulatedWorld(1), "single", deterministic=True)


@pytest.mark.parametrize("ranks,preset", list(itertools.product(range(1, 5), PRESETS)))
def test_bitwise_equal_on_any_ranks_and_preset(reference, ranks, preset):
    assert differing(train(nt.SimulatedWorld(ranks), preset, True), reference) == []


def test_default_mode_sums_partial_results_in_rank_order():
    """Why the mode exists: by default some presets reduce partial sums in a tree over
    ranks, which rounds differently (if this ever passes, update the docs)."""
    default = train(nt.SimulatedWorld(1), "single", False)
    assert differing(train(nt.SimulatedWorld(2), "ddp", False), default) != []


def test_mode_is_part_of_the_plan_fingerprint():
    model = build_mlp(SIZES, BATCH, dtype="fp32")
    plans = [nt.build_plan(model.graph, 2, nt.TilingStrategy.manual(TILES), "ddp",
                           deterministic=flag) for flag in (False, True)]
    assert plans[0].fingerprint() != plans[1].fingerprint()
