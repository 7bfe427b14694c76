"""Plan layer: per-tile facts (size, owner) looked up on demand from per-tensor data.

A 1,024-rank plan has millions of tiles while one rank's program touches a few
thousand, so neither table is filled up front: each tile's entry is computed from
the tensor's tiling or owner array on its first lookup and kept.
"""

from __future__ import annotations

import math

from ..graph.dtypes import ITEMSIZE
from .memory import TileMeta


PARTIAL_MARK = "~"


def partial_name(name, op_name, rank) -> str:
    """The tensor of `rank`'s partial sums into `name`'s tiles for op `op_name`."""
    return f"{name}{PARTIAL_MARK}{op_name}{PARTIAL_MARK}r{rank}"


class TileMetas(dict):
    """key -> TileMeta (shape, dtype, elements, bytes) of a tensor tile."""

    def __init__(self, tilings, dtypes):
        super().__init__()
        self.tilings, self.dtypes = tilings, dtypes   # tensor name -> TilingSpec / dtype

    def __missing__(self, key):
        name, coord = key
        if name not in self.tilings:   # a partial-sum tile: sized like its output tile
            name = name.rsplit(PARTIAL_MARK, 2)[0]
        shape = self.tilings[name].tile_shape(coord)
        size = math.prod(shape)
        dtype = self.dtypes[name]
        meta = self[key] = TileMeta(shape, dtype, size, size * ITEMSIZE[dtype])
        return meta


class OwnerTable(dict):
    """key -> owner code of a tensor tile (a rank, REPLICATED, or a mesh group's group_code);
    a builder adds its partial-sum tiles with the rank computing them."""

    def __init__(self, owners):
        super().__init__()
        self.owners = owners   # tensor name -> owner codes over its tile grid

    def __missing__(self, key):
        name, coord = key
        owner = self[key] = int(self.owners[name][coord])
        return owner
