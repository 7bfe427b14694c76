"""Train layer: reproducible batch order and per-rank binding of data shards.

Every rank derives the same batch indices from (seed, epoch) alone, so data order
is identical on every rank and under every preset; each rank then cuts only the
tiles it holds. Imports the runtime's public API only (no mpi4py).
"""

from __future__ import annotations

import numpy as np


def epoch_permutation(seed: int, epoch: int, count: int) -> np.ndarray:
    """The sample order of `epoch`: a pure function of (seed, epoch), same on every rank."""
    return np.random.default_rng([seed, epoch]).permutation(count)


def batch_indices(seed: int, step: int, batch: int, count: int) -> np.ndarray:
    """Sample indices of global optimizer step `step` (0-based); the last partial batch
    of each epoch is dropped so every step sees `batch` samples."""
    per_epoch = count // batch
    if per_epoch < 1:
        raise ValueError(f"dataset of {count} samples is smaller than one batch of {batch}")
    epoch, position = divmod(step, per_epoch)
    return epoch_permutation(seed, epoch, count)[position * batch:(position + 1) * batch]


class BatchView:
    """Columns `indices` of a dataset array whose trailing dim is the sample axis.

    Indexing with a tile's slices reads only that tile's samples, so a rank that
    binds its own tiles touches only its shard (the array may be an np.memmap).
    """

    def __init__(self, array, indices):
        self.array, self.indices = array, np.asarray(indices)
        self.shape = tuple(array.shape[:-1]) + (len(self.indices),)
        self.dtype = array.dtype

    def __getitem__(self, slices) -> np.ndarray:
        slices = slices if isinstance(slices, tuple) else (slices,)
        *lead, last = slices
        return np.asarray(self.array[(*lead, self.indices[last])])


def bind_local(cg, name: str, array):
    """Bind `array` (anything indexable by tile slices) as tensor `name`, each rank giving
    only the tiles it holds (cg.local_tiles + tile_slices). Collective."""
    spec = cg.plan.tilings[name]
    for rank in cg.world.local_ranks():
        tiles = {coord: array[spec.tile_slices(coord)] for coord in cg.local_tiles(name, rank)}
        cg.bind_tiles(name, tiles, rank=rank)
