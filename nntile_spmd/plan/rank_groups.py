"""Plan layer: one rank's short task groups (fewer steps than a StepTable's), decided
once per class of alike groups of an op, and walked at the steps concerning the rank.

On a mesh a rank takes part in every group that reads a tile of one of its mesh
groups, as a group's members send its tiles (PartialSums.sender_of): a dp column's rank
decides every row's gemm groups to learn whether they fetch its column's weight
tiles (48 layers at 1,024 ranks: about 230,000 groups of 2-16 steps). An op's
groups in one row read the same owner codes, bytes and columns at every output
tile, so the facts partial_choice reads are gathered for all the op's groups at
once with numpy, the groups with equal facts form a class, and each class is
decided once (its step ranks; the tree order, drawn per output tile, is recomputed
for each group). Looking tiles up one by one cost as much as deciding.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..graph.dtypes import ITEMSIZE
from .accumulate import Reduction
from .axes import op_axes
from .distribution import REPLICATED
from .lowering import ViewReadingOp
from .partial import FAN_LIMIT, tree_text
from .rank_partial import NO_RANK


class GroupFacts(NamedTuple):
    """Per group of an op (rows): its class (-1: this rank takes no part), and per
    step whether an input's owner code names this rank (follows_step) and whether
    this rank holds an input it may send (one of its owners: sender_of decides)."""
    classes: np.ndarray
    named: np.ndarray
    sent: np.ndarray


class OpArrays(NamedTuple):
    """Owner codes, bytes and column codes (NO_RANK: none) of the output tile of
    each group (G,) and of each input tile of each step (G, inputs, steps)."""
    out_codes: np.ndarray
    out_bytes: np.ndarray
    out_columns: np.ndarray
    codes: np.ndarray
    nbytes: np.ndarray
    columns: np.ndarray


class ShortGroups:
    """Mixin of RankProgramBuilder: needs its walk, PartialSums and TableSteps."""

    def add_short_groups(self, groups):
        """The groups this rank takes part in, decided by class where their facts
        can be read as arrays (every group with the same steps), else one by one."""
        arrays = self.op_arrays(groups) if self.regular(groups) else None
        if arrays is None:
            for group in groups:
                if self.takes_part(group):
                    self.add_group(group)
            return
        facts, decided = self.group_facts(groups, arrays), {}
        for index in np.flatnonzero(facts.classes >= 0).tolist():
            self.add_classed_group(groups[index], index, facts, decided)

    def add_classed_group(self, group, index, facts, decided):
        """ProgramBuilder.add_group with its class's choice."""
        self.check_outputs(group)
        out_key = group.outputs[0]
        owner = self.owner[out_key]
        step_ranks = decided.get(facts.classes[index], ())
        if step_ranks == ():
            choice = self.partial_choice(group)
            step_ranks = decided[facts.classes[index]] = None if choice is None else \
                tuple(choice.step_ranks)
        if step_ranks is None and self.carried_to(group) is not None:
            choice = self.carried_choice(group)   # per group: the carry is not a class fact
            step_ranks = None if choice is None else tuple(choice.step_ranks)
        carried = self.take_carried(group, step_ranks)
        if step_ranks is not None:
            order, _ = self.tree_plan(step_ranks, owner, tree_text(group.op.name, out_key))
            return self.run_partial(group, owner, step_ranks, order, carried,
                                    facts.named[index])
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

    def regular(self, groups) -> bool:
        """Can the groups' facts be read as arrays? Several groups of the same number
        of steps (2 or more) that may be split into partial sums, of an op reading
        distinct tensors of at least one dim, none of which it writes (so no group
        changes what another reads), without views (their keys name other tensors)."""
        op = groups[0].op
        names = {tensor.name for tensor in op.inputs}
        n_steps = len(groups[0].steps)
        return len(groups) > 1 and n_steps > 1 and not isinstance(op, ViewReadingOp) and \
            op.spec.combine is not None and not self.deterministic and \
            len(names) == len(op.inputs) and not names & {t.name for t in op.outputs} and \
            all(tensor.ndim for tensor in op.inputs + op.outputs) and \
            all(len(group.steps) == n_steps for group in groups)

    def op_arrays(self, groups):
        """OpArrays of an op's groups, or None if a group reads one tile twice."""
        op, n_steps = groups[0].op, len(groups[0].steps)
        outputs = self.tile_facts(op.outputs[0].name, [group.outputs[0][1] for group in groups])
        per_input = []
        for position, tensor in enumerate(op.inputs):
            coords = [step.keys[position][1] for group in groups for step in group.steps]
            facts = self.tile_facts(tensor.name, coords, n_steps)
            if facts is None:
                return None
            per_input.append(facts)
        return OpArrays(*(part[:, 0] for part in outputs),
                        *(np.stack([facts[part] for facts in per_input], 1)
                          for part in range(3)))

    def group_facts(self, groups, arrays):
        """GroupFacts of an op's groups: those this rank takes part in (as takes_part)
        and is not idle in (idle_in), classed by the facts partial_choice reads."""
        codes, out_codes = arrays.codes, arrays.out_codes
        my_codes = np.array(sorted(self.my_codes), np.int64)
        held = np.isin(codes, my_codes[my_codes != REPLICATED]).any(1)
        # the tiles this rank may send: it holds them (sender_of decides for whom)
        sent_keys = np.isin(codes, my_codes[my_codes != REPLICATED])
        taking = np.isin(out_codes, my_codes) | held.any(1)
        # a rank holding a partial carried to a group reduces it there (accumulate.py)
        kept = {index for index, group in enumerate(groups)
                if any(key in self.mine for key in group.outputs) or
                self.carries(group.op.name, group.outputs[0], self.rank)}
        taking[list(kept)] = True
        maybe = np.flatnonzero(taking & ~np.isin(out_codes, my_codes))
        if len(maybe):
            op = groups[0].op
            coords = np.array([groups[index].coord for index in maybe.tolist()], np.int64)
            wide = np.stack([self.wide_readers(op, position, coords)
                             for position in range(len(op.inputs))], 1).tolist()
            for index, *facts in zip(maybe.tolist(), wide, held[maybe].tolist(),
                                     sent_keys[maybe].transpose(0, 2, 1).tolist(),
                                     *(part[maybe].transpose(0, 2, 1).tolist() for part in
                                       (codes, arrays.nbytes, arrays.columns))):
                if index not in kept and self.idle_in(groups[index], int(out_codes[index]),
                                     int(arrays.out_columns[index]), *facts):
                    self.check_outputs(groups[index])
                    taking[index] = False
        classes = np.full(len(groups), -1, np.int64)
        if taking.any():
            chosen = np.flatnonzero(taking)
            table = np.column_stack(
                [out_codes[chosen], arrays.out_bytes[chosen], arrays.out_columns[chosen],
                 self.reader_values(groups, chosen, out_codes[chosen])] +
                [part[chosen].reshape(len(chosen), -1)
                 for part in (codes, arrays.nbytes, arrays.columns)])
            classes[chosen] = np.unique(table, axis=0, return_inverse=True)[1].reshape(-1)
        return GroupFacts(classes, np.isin(codes, my_codes).any(1), sent_keys.any(1))

    def idle_in(self, group, owner, out_column, wide, held_steps, sent_keys, codes, nbytes,
                columns) -> bool:
        """Is this rank's part of a group it does not own only the versions its steps
        bump, whichever way the group is decided? It runs none of the steps reading
        a tile of its owner codes (`held_steps`; it holds none of the others' tiles, so
        best_rank never picks it there), and each tile it would send (`sent_keys`:
        steps by inputs, as `codes`, `nbytes`, `columns`) is current on that step's
        rank and on every owner of the output (its partial-sum and its owner-computes
        runners): a weight gathered down a tree before the op. Such a group's versions
        matter to no later step here: this rank holds no copy of its outputs and sends
        none of them. The answer holds for the op's later groups too (nothing they
        write is read by the op: regular; this rank's sends only make more copies
        current)."""
        me, out_key, wide = self.rank, group.outputs[0], tuple(wide)
        out_column = out_column if out_key[0] in self.columns else None
        out_ranks = None
        for step_index, held in enumerate(held_steps):
            if not held:
                continue
            signature = (owner, wide, out_column, tuple([
                (code, size, None if column == NO_RANK else column) for code, size, column
                in zip(codes[step_index], nbytes[step_index], columns[step_index])]))
            runner = self.best_memo.get(signature)   # PartialSums.best_rank's memo
            if runner is None:
                runner = self.best_rank(group.steps[step_index].keys[:len(wide)], owner,
                                        wide, out_key)
            if runner == me:
                return False
            for position, sent in enumerate(sent_keys[step_index]):
                if not sent:
                    continue
                key, holders = group.steps[step_index].keys[position], \
                    self.rank_set(codes[step_index][position])
                if out_ranks is None:
                    out_ranks = self.ranks_of_owner(owner)
                for rank in (runner, *out_ranks):
                    if rank not in holders and not self.is_current(rank, key) and \
                            self.sender_of(codes[step_index][position], rank) == me:
                        return False
        return True

    def wide_readers(self, op, position, coords) -> np.ndarray:
        """PartialSums.widely_read of input `position` for groups at output tile
        `coords` (rows): whether the output tiles sharing a group's coordinates along
        the input's labels have more than FAN_LIMIT owner codes (not all meeting the
        input's owners), counted for the whole output grid once per op and position."""
        memo_key = (op.name, position)
        found = self.wide_memo.get(memo_key)
        if found is None:
            axes, n_inputs = op_axes(op), len(op.inputs)
            dims = [dim for dim, label in enumerate(axes[n_inputs]) if label in axes[position]]
            owners = self.owners[op.outputs[0].name]
            kept = [owners.shape[dim] for dim in dims]
            rows = np.sort(np.transpose(owners, dims + [dim for dim in range(owners.ndim)
                                                        if dim not in dims]).reshape(
                int(np.prod(kept)), -1), 1)
            distinct = 1 + np.count_nonzero(np.diff(rows, axis=1), axis=1)
            wide = distinct > FAN_LIMIT
            name = op.inputs[position].name
            for row in np.flatnonzero(wide).tolist():   # PartialSums.held_by_readers
                wide[row] = not self.held_by_readers(name, np.unique(rows[row]))
            found = self.wide_memo[memo_key] = (dims, wide.reshape(kept))
        dims, table = found
        return np.broadcast_to(table[tuple(coords[:, dims].T)], (len(coords),))

    def reader_values(self, groups, chosen, owners):
        """PartialSums.sharing (given the output owner codes `owners`) and
        widely_read (0 or 1) of each input position of the groups `chosen`, a column
        each: they read the output coordinate only along the input's labels, so each
        is computed once per distinct (those coordinates, owner)."""
        op = groups[0].op
        axes, n_inputs = op_axes(op), len(op.inputs)
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

    def run_partial(self, group, owner, step_ranks, order, carried=None, named=None):
        """ProgramBuilder.run_partial for this rank: the steps that follows_step keeps
        (this rank runs them, or a tile they read or write has an owner code naming it;
        `named`: per step, whether an input's does), found without forming the other
        steps' partial-sum keys; then its own tree merges."""
        op, out_key, me = group.op, group.outputs[0], self.rank
        keys_op, order = (op, order) if carried is None else (carried.keys_op, carried.order)
        n_inputs, root, codes, owner_of = len(op.inputs), order[0], self.my_codes, self.owner
        root_named = owner in codes
        # steps each rank ran so far: its beta (a carried tree's ranks ran one at least)
        counts = {} if carried is None else dict.fromkeys(order, 1)
        for index, (step, rank) in enumerate(zip(group.steps, step_ranks)):
            count = counts.get(rank, 0)
            counts[rank] = count + 1
            keys = step.keys
            if rank != me and not (rank == root and root_named) and not (
                    named[index] if named is not None else
                    any(owner_of[key] in codes for key in keys[:n_inputs])):
                continue
            if rank != root:
                keys = keys[:n_inputs] + (self.temp_key(keys_op, out_key, rank),)
            self.run_step([rank], group, step, count, keys, zero_beta=rank != root and count == 0)
        self.carry_or_reduce(Reduction(op, keys_op, out_key, owner, tuple(order),
                                       group.reads_output_first), step_ranks, root in counts)
