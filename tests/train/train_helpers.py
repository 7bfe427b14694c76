"""Helpers of the train tests: a small fp64 MLP and trainers on simulated or real worlds."""

import numpy as np

import nntile_spmd as nt
from nntile_spmd.models import build_mlp
from nntile_spmd.train import Trainer

SIZES = (6, 9, 4)          # features, hidden, classes: small, and 9 splits unevenly
SAMPLES = 48


def init_params(seed=0):
    return build_mlp(SIZES, 12, dtype="fp64").init_params(np.random.default_rng(seed))


def make_trainer(ranks=1, distribution="single", batch=12, accumulation=1,
                 optimizer="adam", tile_bytes=96, params=None, comm=None, log_path=None,
                 seed=0, checkpoints=None, **hyper):
    """A trainer of the small MLP on SimulatedWorld(ranks) (or `comm`, e.g. real MPI);
    tiny tiles, uneven splits."""
    model = build_mlp(SIZES, batch, dtype="fp64", accumulation=accumulation)
    hyper = hyper or {"lr": 1e-2}
    trainer = Trainer(model, optimizer, comm=comm or nt.SimulatedWorld(ranks),
                      distribution=distribution, progress=False, log_path=log_path,
                      tiling=nt.TilingStrategy.auto(target_tile_bytes=tile_bytes), seed=seed,
                      **(checkpoints or {}), **hyper)
    trainer.bind_params(params if params is not None else init_params())
    return trainer


WORLDS = [(1, "single"), (2, "ddp"), (3, "ddp"), (2, "fsdp"), (3, "fsdp"), (2, "tp"),
          (3, "tp")]
