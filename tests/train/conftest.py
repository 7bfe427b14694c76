"""Shared helpers of the train tests: a small fp64 MLP, random data, trainers."""

import numpy as np
import pytest

import nntile_spmd as nt
from nntile_spmd.models import build_mlp
from nntile_spmd.train import Trainer

SIZES = (6, 9, 4)          # features, hidden, classes: small, and 9 splits unevenly
SAMPLES = 48


@pytest.fixture(scope="session")
def data():
    """Random classification data: x (features, samples) fp64, y int64 labels."""
    rng = np.random.default_rng(42)
    x = np.asfortranarray(rng.standard_normal((SIZES[0], SAMPLES)))
    y = rng.integers(0, SIZES[-1], SAMPLES).astype(np.int64)
    return {"x": x, "y": y}


def init_params(seed=0):
    return build_mlp(SIZES, 12, dtype="fp64").init_params(np.random.default_rng(seed))


def make_trainer(ranks=1, distribution="single", batch=12, accumulation=1,
                 optimizer="adam", tile_bytes=96, params=None, **hyper):
    """A trainer of the small MLP on SimulatedWorld(ranks); tiny tiles, uneven splits."""
    model = build_mlp(SIZES, batch, dtype="fp64", accumulation=accumulation)
    hyper = hyper or {"lr": 1e-2}
    trainer = Trainer(model, optimizer, comm=nt.SimulatedWorld(ranks),
                      distribution=distribution, progress=False,
                      tiling=nt.TilingStrategy.auto(target_tile_bytes=tile_bytes), **hyper)
    trainer.bind_params(params if params is not None else init_params())
    return trainer


WORLDS = [(1, "single"), (2, "ddp"), (3, "ddp"), (2, "fsdp"), (3, "fsdp"), (2, "tp"),
          (3, "tp")]
