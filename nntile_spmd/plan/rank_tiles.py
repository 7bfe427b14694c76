"""Plan layer: which output tiles of an op one rank may take part in, from owner arrays.

RankProgramBuilder.takes_part decides group by group; lowering every group of every
op to ask it costs as much as the all-ranks plan. This finds, with numpy over the
op's tile grids, the output tiles whose group could pass that test: the rank owns
the output tile, owns a tile some step may read (any tile along the summed axes
meeting the output tile), or holds a copy of a tile the group writes. It may keep
a tile whose group then does not take part (windows, steps dropped as not needed),
never the other way round; only these tiles are lowered.
"""

from __future__ import annotations

import numpy as np

from .axes import op_axes
from .distribution import REPLICATED, group_code


class RankTiles:
    """Output tiles of each op that concern `rank` (its codes: itself, its mesh groups)."""

    def __init__(self, rank, groups, owners, tilings, views):
        self.codes = np.array([rank] + [group_code(index) for index, members in enumerate(groups)
                                        if rank in members])
        self.owners, self.tilings, self.views = owners, tilings, views
        self.groups = groups
        self.walk = None          # the RankProgramBuilder: who holds which current copy
        self.copies = {}          # tensor name -> coords of tiles fetched by this rank
        self.alias_owners = {}    # view tensor name -> owners of the tiles it aliases
        self.served_memo = {}     # (owner code, runner code) -> ranks this rank sends to
        self.mine_memo = {}       # tensor name -> its tiles this rank's codes own (static)

    def note_copy(self, key):
        name, coord = key
        self.copies.setdefault(name, set()).add(coord)

    def coords(self, op):
        """Output tile coords of `op` to lower for this rank, in tile order."""
        axes = op_axes(op)
        if any(len(set(labels)) != len(labels) for labels in axes):
            return None   # a label twice in one array: lower every tile
        n_inputs = len(op.inputs)
        out_labels = axes[n_inputs]
        out_name = op.outputs[0].name
        out_owners = self.owners_of(out_name)
        # an array even over a 0-d grid (a scalar's): `|` of two 0-d arrays is a numpy
        # scalar, which the marks below could not assign into
        mask = np.array(self.mine(out_name) | (out_owners == REPLICATED))
        one_step = all(self.tilings[tensor.name].dims[dim].num_tiles == 1
                       for tensor, labels in zip(op.inputs, axes[:n_inputs])
                       for dim, label in enumerate(labels) if label not in out_labels)
        for tensor, labels in zip(op.inputs, axes[:n_inputs]):
            owners = self.owners_of(tensor.name)
            mine = self.mine(tensor.name)
            if not mine.any():
                continue
            if one_step and tensor.name not in self.views.names:
                self.mark_unsent(mask, tensor.name, owners, labels, out_labels, out_owners)
            else:
                mask |= self.project(mine, labels, out_labels, mask.shape)
        for tensor, labels in zip(op.outputs, axes[n_inputs:]):
            fetched = self.copies.get(tensor.name)
            if fetched:
                held = np.zeros(self.tilings[tensor.name].grid, dtype=bool)
                held[tuple(np.array(sorted(fetched)).T)] = True
                mask |= self.project(held, labels, out_labels, mask.shape)
        for _, coord in self.walk.carried_keys(op.name, int(self.codes[0])):
            mask[coord] = True   # this rank reduces its carried partial there
        return [tuple(coord) for coord in np.argwhere(mask.T)[:, ::-1].tolist()]

    def mark_unsent(self, mask, name, owners, labels, out_labels, out_owners):
        """Mark the output tiles of a one-step op whose runners lack the current version
        of a tile this rank sends them (it holds the tile and sender_of names it for
        them). Where every such runner holds it, this rank's part of the group (its
        ranks' copies checked, the output's version advanced) changes nothing it will
        look at again: the output is not this rank's, and it holds no copy of it (those
        tiles are marked apart)."""
        walk = self.walk
        for coord in map(tuple, np.argwhere(self.mine(name)).tolist()):
            code = int(owners[coord])
            holders = set(walk.rank_set(code))
            holders.update(walk.current_copies((name, coord)))
            index = tuple(coord[labels.index(label)] if label in labels else slice(None)
                          for label in out_labels)
            runners = out_owners[index]
            for runner in set(np.ravel(runners).tolist()):   # marks OR together: any order
                if not holders.issuperset(self.served(code, runner)):
                    mask[index] |= runners == runner

    def served(self, code, runner) -> tuple:
        """The ranks of owner code `runner` to which this rank sends a tile of owner
        code `code` (PartialSums.sender_of), memoized per pair of codes."""
        found = self.served_memo.get((code, runner))
        if found is None:
            walk, rank = self.walk, self.codes[0]
            found = self.served_memo[(code, runner)] = tuple(
                member for member in walk.rank_set(runner)
                if walk.sender_of(code, member) == rank)
        return found

    def mine(self, name):
        """The tiles of tensor `name` that this rank's codes own (a boolean array over its
        grid; owners are static, so once per tensor; an equality per code, as the codes
        are one to a few and np.isin's sort costs more on these small grids)."""
        found = self.mine_memo.get(name)
        if found is None:
            owners = self.owners_of(name)
            found = np.array(owners == self.codes[0])   # 0-d grids compare to a scalar
            for code in self.codes[1:]:
                found |= owners == code
            found.flags.writeable = False
            self.mine_memo[name] = found
        return found

    @staticmethod
    def project(tiles, labels, out_labels, out_grid):
        """Output tiles meeting a marked tile: any over axes the output lacks, then
        broadcast along output axes the array lacks."""
        summed = tuple(dim for dim, label in enumerate(labels) if label not in out_labels)
        kept = [label for label in labels if label in out_labels]
        reduced = tiles.any(axis=summed) if summed else tiles
        order = sorted(range(len(kept)), key=lambda i: out_labels.index(kept[i]))
        reduced = reduced.transpose(order) if kept else reduced
        shape = [out_grid[dim] if label in kept else 1
                 for dim, label in enumerate(out_labels)]
        return np.broadcast_to(reduced.reshape(shape), out_grid)

    def owners_of(self, name):
        """Owner codes over a tensor's tile grid; a view tensor's are those of the tiles
        it aliases (lowering rewrites its keys into theirs)."""
        if name not in self.views.names:
            return self.owners[name]
        found = self.alias_owners.get(name)
        if found is None:
            spec = self.tilings[name]
            found = np.empty(spec.grid, dtype=self.owners[name].dtype)
            for coord in spec.coords():
                alias_name, alias_coord = self.views[(name, coord)][0]
                found[coord] = self.owners[alias_name][alias_coord]
            self.alias_owners[name] = found
        return found
