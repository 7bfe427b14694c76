"""Plan layer: a task group's steps as a table, built one step at a time on demand.

Under FSDP a weight gradient's tile is a sum over the batch, one step per batch
tile, so a 1,024-rank plan has groups of 1,024 steps of which one rank runs one or
two. A rank lowering alone (plan/rank_tiles.py) gets such groups with a StepTable
in place of the tuple of steps: the tile coordinates of every step as integer
arrays, from which plan/rank_partial.py takes the group's decisions with numpy,
and a Step object only for the steps the rank runs or sends to.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


class StepTable(Sequence):
    """Steps of one output tile: `combos` are the summed-label tile indices of each
    step (rows of `combo_array`), `columns[p]` the step-vector positions (output
    coordinate, then summed labels) that give array p's tile coordinate."""

    __slots__ = ("out_coord", "combos", "combo_array", "columns", "make_step")

    def __init__(self, out_coord, combos, combo_array, columns, make_step):
        self.out_coord, self.combos, self.combo_array = out_coord, combos, combo_array
        self.columns, self.make_step = columns, make_step   # make_step(vector) -> Step

    def __len__(self):
        return len(self.combos)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        return self.make_step(self.out_coord + self.combos[index])

    def __iter__(self):
        out_coord, make_step = self.out_coord, self.make_step
        return (make_step(out_coord + combo) for combo in self.combos)

    def coords(self, position) -> np.ndarray:
        """(steps, ndim) tile coordinates of array `position` (inputs, then outputs)."""
        n_out, combos = len(self.out_coord), self.combo_array
        columns = self.columns[position]
        table = np.empty((len(combos), len(columns)), dtype=np.int64)
        for dim, column in enumerate(columns):
            table[:, dim] = self.out_coord[column] if column < n_out else \
                combos[:, column - n_out]
        return table
