"""Plan layer: one rank's short task groups (fewer steps than a StepTable's), decided
once per class of alike groups of an op, and walked at the steps concerning the rank.

On a mesh a rank takes part in every group that reads a tile of one of its mesh
groups, as the first rank of a group sends its tiles: the first rank of a dp column
decides every row's gemm groups to learn whether they fetch its column's weight
tiles (48 layers at 1,024 ranks: about 230,000 groups of 2-16 steps). An op's
groups in one row read the same owner codes, bytes and columns at every output
tile, so the facts partial_choice reads are gathered for all the op's groups at
once with numpy, the groups with equal facts form a class, and each class is
decided once (its step ranks; the tree order, drawn per output tile, is recomputed
for each group). Looking tiles up one by one cost as much as deciding.
"""

from __future__ import annotations

import numpy as np

from ..graph.dtypes import ITEMSIZE
from .axes import op_axes
from .distribution import REPLICATED
from .lowering import ViewReadingOp
from .partial import tree_text
from .rank_partial import NO_RANK


class GroupFacts:
    """Per group of an op (rows): its class, and per step whether an input's owner
    code names this rank (follows_step) or an input is sent by it (first holder)."""

    def __init__(self, classes, named, sent):
        self.classes, self.named, self.sent = classes, named, sent


class ShortGroups:
    """Mixin of RankProgramBuilder: needs its walk, PartialSums and TableSteps."""

    def add_short_groups(self, groups):
        """The groups this rank takes part in, decided by class where their facts
        can be read as arrays (every group with the same steps), else one by one."""
        facts = self.group_facts(groups) if len(groups) > 1 else None
        if facts is None:
            for group in groups:
                if self.takes_part(group):
                    self.add_group(group)
            return
        decided = {}
        for index, group in enumerate(groups):
            if facts.classes[index] >= 0:
                self.add_classed_group(group, index, facts, decided)

    def add_classed_group(self, group, index, facts, decided):
        """ProgramBuilder.add_group with its class's choice."""
        self.check_outputs(group)
        out_key = group.outputs[0]
        owner = self.owner[out_key]
        step_ranks = decided.get(facts.classes[index], ())
        if step_ranks == ():
            choice = self.partial_choice(group)
            step_ranks = decided[facts.classes[index]] = None if choice is None else \
                tuple(choice[0])
        if step_ranks is not None:
            order, _ = self.tree_plan(step_ranks, owner, tree_text(group.op.name, out_key))
            return self.run_partial(group, owner, step_ranks, order, facts.named[index])
        ranks = list(self.ranks_of_owner(owner))
        steps = group.steps
        if self.rank in ranks:
            for step_index, step in enumerate(steps):
                self.run_step(ranks, group, step, step_index, step.keys)
            return
        done = 0   # only the steps reading a tile this rank sends; the rest bump versions
        for step_index in np.flatnonzero(facts.sent[index]).tolist():
            self.advance(group.outputs, step_index - done)
            self.run_step(ranks, group, steps[step_index], step_index, steps[step_index].keys)
            done = step_index + 1
        self.advance(group.outputs, len(steps) - done)

    def group_facts(self, groups):
        """GroupFacts of an op's groups (class -1: this rank takes no part), or None
        where their steps differ in number, a step reads a tile twice, or views are
        read (their keys name other tensors)."""
        op = groups[0].op
        n_inputs, n_steps = len(op.inputs), len(groups[0].steps)
        if isinstance(op, ViewReadingOp) or n_steps < 2 or op.spec.combine is None or \
                self.deterministic or len({t.name for t in op.inputs}) < n_inputs or \
                {t.name for t in op.inputs} & {t.name for t in op.outputs} or \
                any(t.ndim == 0 for t in op.inputs + op.outputs) or \
                any(len(group.steps) != n_steps for group in groups):
            return None
        out_codes, out_bytes, out_columns = (part[:, 0] for part in self.tile_facts(
            op.outputs[0].name, [group.outputs[0][1] for group in groups]))
        per_input = []
        for position, tensor in enumerate(op.inputs):
            coords = [step.keys[position][1] for group in groups for step in group.steps]
            facts = self.tile_facts(tensor.name, coords, n_steps)
            if facts is None:
                return None
            per_input.append(facts)
        codes, nbytes, columns = (np.concatenate([facts[part] for facts in per_input], 1)
                                  for part in range(3))
        my_codes = np.array(sorted(self.my_codes), np.int64)
        shape = (len(groups), n_inputs, n_steps)
        named = np.isin(codes, my_codes).reshape(shape).any(1)
        sent_keys = ((self.first_holders(codes) == self.rank) &
                     (codes != REPLICATED)).reshape(shape)
        held = np.isin(codes, my_codes[my_codes != REPLICATED]).reshape(shape).any(1)
        taking = np.isin(out_codes, my_codes) | held.any(1)
        mine = self.mine
        for index, group in enumerate(groups):
            if any(key in mine for key in group.outputs):
                taking[index] = True
            elif taking[index] and out_codes[index] not in self.my_codes and self.idle_in(
                    group, int(out_codes[index]), np.flatnonzero(held[index]).tolist(),
                    sent_keys[index]):
                self.check_outputs(group)
                taking[index] = False
        classes = np.full(len(groups), -1, np.int64)
        if taking.any():
            chosen = np.flatnonzero(taking)
            table = np.column_stack([out_codes[chosen], out_bytes[chosen],
                                     out_columns[chosen],
                                     self.sharing_and_wide(groups, chosen, out_codes[chosen]),
                                     codes[chosen], nbytes[chosen], columns[chosen]])
            classes[chosen] = np.unique(table, axis=0, return_inverse=True)[1].reshape(-1)
        return GroupFacts(classes, named, sent_keys.any(1))

    def idle_in(self, group, owner, held_steps, sent_keys) -> bool:
        """Is this rank's part of a group it does not own only the versions its steps
        bump, whichever way the group is decided? It runs none of the steps reading
        a tile of its owner codes (`held_steps`; it holds none of the others' tiles, so
        best_rank never picks it there), and each tile it would send (`sent_keys`:
        positions by steps) is current on that step's rank and on every owner of the
        output (its partial-sum and its owner-computes runners): a weight gathered down
        a tree before the op. Such a group's versions matter to no later step here:
        this rank holds no copy of its outputs and sends none of them.
        The answer holds for the op's later groups too (nothing they write is read by
        the op, group_facts; this rank's sends only make more copies current)."""
        me, n_inputs = self.rank, len(group.op.inputs)
        out_ranks, wide = self.ranks_of_owner(owner), self.wide_positions(group)
        for step_index in held_steps:
            keys = group.steps[step_index].keys[:n_inputs]
            runner = self.best_rank(keys, owner, wide, group.outputs[0])
            if runner == me:
                return False
            for position in np.flatnonzero(sent_keys[:, step_index]).tolist():
                key = keys[position]
                holders = self.rank_set(self.owner[key])
                for rank in (runner, *out_ranks):
                    if rank not in holders and not self.is_current(rank, key):
                        return False
        return True

    def sharing_and_wide(self, groups, chosen, owners):
        """PartialSums.sharing and widely_read (0 or 1) of each input position of the
        groups `chosen` (whose output owner codes are `owners`), a column each: they
        read the output coordinate only along the input's labels, so each is computed
        once per distinct (those coordinates, owner)."""
        op = groups[0].op
        axes = op_axes(op)
        n_inputs = len(op.inputs)
        coords = np.array([groups[index].coord for index in chosen.tolist()], np.int64)
        sharing, wide = [], []
        for position in range(n_inputs):
            dims = [dim for dim, label in enumerate(axes[n_inputs]) if label in axes[position]]
            rows = np.column_stack([coords[:, dims], owners])
            _, first, inverse = np.unique(rows, axis=0, return_index=True, return_inverse=True)
            values = np.array([(self.sharing(op, position, groups[index].coord, owner),
                                self.widely_read(op, position, groups[index].coord))
                               for index, owner in zip(chosen[first].tolist(),
                                                       owners[first].tolist())], np.int64)
            inverse = inverse.reshape(-1)
            sharing.append(values[inverse, 0])
            wide.append(values[inverse, 1])
        return np.stack(sharing + wide, 1)

    def tile_facts(self, name, coords, n_steps=1):
        """(owner codes, bytes, column codes) of tiles of `name` at `coords`, one row
        per group (n_steps columns); None if a group reads one tile twice."""
        grid = self.owners[name].shape
        table = np.array(coords, np.int64).reshape(len(coords), len(grid))
        ids = np.ravel_multi_index(table.T, grid).reshape(-1, n_steps)
        if n_steps > 1 and (np.diff(np.sort(ids, 1), axis=1) == 0).any():
            return None
        nbytes = np.full(table.shape[0], ITEMSIZE[self.meta.dtypes[name]], np.int64)
        for dim, sizes in enumerate(self.dim_sizes(name)):
            nbytes *= sizes[table[:, dim]]
        columns = self.columns[name].reshape(-1)[ids] if name in self.columns else \
            np.full(ids.shape, NO_RANK)
        return (self.owners[name].reshape(-1)[ids].astype(np.int64),
                nbytes.reshape(ids.shape), columns.astype(np.int64))

    def run_partial(self, group, owner, step_ranks, order, named=None):
        """ProgramBuilder.run_partial for this rank: the steps that follows_step keeps
        (this rank runs them, or a tile they read or write has an owner code naming it;
        `named`: per step, whether an input's does), found without forming the other
        steps' partial-sum keys; then its own tree merges."""
        op, out_key, me = group.op, group.outputs[0], self.rank
        n_inputs, root, codes, owner_of = len(op.inputs), order[0], self.my_codes, self.owner
        root_named = owner in codes
        counts = {}   # steps each rank ran so far: its beta
        for index, (step, rank) in enumerate(zip(group.steps, step_ranks)):
            count = counts.get(rank, 0)
            counts[rank] = count + 1
            keys = step.keys
            if rank != me and not (rank == root and root_named) and not (
                    named[index] if named is not None else
                    any(owner_of[key] in codes for key in keys[:n_inputs])):
                continue
            if rank != root:
                keys = keys[:n_inputs] + (self.temp_key(op, out_key, rank),)
            self.run_step([rank], group, step, count, keys, zero_beta=rank != root and count == 0)
        if me in order:
            self.my_merges(group, list(order).index(me), list(order), root in counts)
        if owner < 0:
            self.broadcast_to_group(out_key, root, op.name)
