"""Plan layer: one rank's part of a task group given as a StepTable, with numpy.

The decisions are PartialSums' (plan/partial.py) and the rank's part of them is
RankProgramBuilder's, computed over arrays of the steps' input owners and sizes
instead of step by step: the choice between owner computes and partial sums (the
owner's cost summed in the same order, so the floats agree bit for bit), each
step's rank, and which steps concern this rank. Only those steps are built and
walked; this rank's merges of the reduction tree and hops of a broadcast are found
from its position in the tree, O(log n) in place of every pair.

A tile owned by a mesh group (a tp row's activation, a dp column's weight) names
several ranks: who holds it is a look-up in a (group, rank) membership table, and
each step's best rank is PartialSums.best_rank's, memoized by the step's signature
(what it reads: its tiles' owner codes, bytes and columns), as the steps of a
long group and of the op's other groups repeat a few of them (one per batch row).
"""

from __future__ import annotations

import zlib
from functools import cached_property
from typing import NamedTuple

import numpy as np

from ..graph.dtypes import ITEMSIZE
from .accumulate import PartialChoice, Reduction
from .distribution import REPLICATED, group_of
from .partial import FAN_LIMIT, rotated, tree_text

NO_RANK = np.iinfo(np.int64).max


class StepArrays(NamedTuple):
    """(steps, inputs) arrays of a group's input tiles."""
    codes: np.ndarray    # owner code of each input tile (a rank or REPLICATED)
    nbytes: np.ndarray   # its bytes
    ids: np.ndarray      # its flat index in its tensor's tile grid
    tiles: tuple         # tiles in each input tensor's grid
    scored: np.ndarray   # the rank each input counts on in best_ranks (a shard: its
    forced: np.ndarray   # shard_ranks, then forced True), else its owner code
    firsts: tuple        # per input, the step first reading each of its tiles, by id
    columns: np.ndarray  # column code of each input tile of a mesh's fsdp shard, else NO_RANK
    by_signature: bool   # best ranks by step signature: a mesh group owns an input
                         # tile, or a shard's gathered copy is on several ranks


class TableSteps:
    """Mixin of RankProgramBuilder: needs its walk state and PartialSums."""

    def step_arrays(self, group):
        """StepArrays of a StepTable group."""
        table, inputs = group.steps, group.op.inputs
        per_input, shards = [], []
        for position, tensor in enumerate(inputs):
            ids, nbytes, firsts = self.input_ids(group.op, position, table)
            owners = self.owners[tensor.name]
            column = np.full(len(ids), NO_RANK)
            if tensor.name in self.columns:
                column = self.columns[tensor.name].reshape(-1)[ids]
                shards.append((position, column))
            per_input.append((owners.reshape(-1)[ids], nbytes, ids, owners.size, firsts,
                              column))
        codes, nbytes, ids, tiles, firsts, column = zip(*per_input)
        codes = np.stack(codes, 1)
        scored, forced = codes, np.zeros(codes.shape, bool)
        by_signature = bool(codes.min() < REPLICATED)
        if shards and not by_signature:
            scored, out_owner = codes.copy(), self.owner[group.outputs[0]]
            for position, column_codes in shards:
                for code in np.unique(column_codes).tolist():
                    ranks = self.column_ranks(code, out_owner)
                    by_signature |= len(ranks) > 1   # several ranks may use the copy
                    if len(ranks) == 1:
                        chosen = column_codes == code
                        scored[chosen, position] = ranks[0]
                        forced[chosen, position] = True
        return StepArrays(codes, np.stack(nbytes, 1), np.stack(ids, 1), tiles, scored,
                          forced, firsts, np.stack(column, 1), by_signature)

    def input_ids(self, op, position, table):
        """(flat tile index, bytes) of input `position`'s tile at every step, and the
        first step reading each distinct tile (in order of the index). The flat
        index is linear and the bytes a product in the tile coordinates, so the summed
        labels' part is computed once per op (every group shares its combos) and
        each group adds its output coordinate's offset and factor."""
        memo_key = (op.name, position)
        found = self.id_memo.get(memo_key)
        if found is None or found[0] is not table.combo_array:
            found = self.id_memo[memo_key] = (table.combo_array,) + \
                self.summed_part(op.inputs[position].name, table, position)
        _, summed_ids, summed_bytes, out_dims, firsts = found
        offset, factor = 0, 1
        for stride, sizes, column in out_dims:
            coord = table.out_coord[column]
            offset += stride * coord
            factor *= int(sizes[coord])
        return summed_ids + offset, summed_bytes * factor, firsts

    def summed_part(self, name, table, position):
        """(ids, bytes) of the summed labels' coordinates of every step, (stride,
        sizes, vector position) of the dims given by the output coordinate, and the
        first step of each distinct id (an offset added to all keeps them)."""
        combos, n_out = table.combo_array, len(table.out_coord)
        grid = self.owners[name].shape
        strides = np.cumprod((1,) + grid[:0:-1])[::-1] if grid else ()
        ids = np.zeros(len(combos), np.int64)
        nbytes = np.full(len(combos), ITEMSIZE[self.meta.dtypes[name]], np.int64)
        out_dims = []
        for dim, (column, sizes) in enumerate(zip(table.columns[position],
                                                  self.dim_sizes(name))):
            if column < n_out:
                out_dims.append((int(strides[dim]), sizes, column))
                continue
            coords = combos[:, column - n_out]
            ids += int(strides[dim]) * coords
            nbytes *= sizes[coords]
        return ids, nbytes, tuple(out_dims), np.unique(ids, return_index=True)[1]

    def dim_sizes(self, name):
        found = self.size_arrays.get(name)
        if found is None:
            found = self.size_arrays[name] = [
                np.array(dim.sizes, np.int64) for dim in self.meta.tilings[name].dims]
        return found

    def table_takes_part(self, group, arrays) -> bool:
        return self.rank in self.rank_set(self.owner[group.outputs[0]]) or \
            any(key in self.mine for key in group.outputs) or \
            self.carries(group.op.name, group.outputs[0], self.rank) or \
            bool((self.holds(self.rank, arrays.codes) & (arrays.codes != REPLICATED)).any())

    def add_table_group(self, group, arrays):
        self.check_outputs(group)
        owner = self.owner[group.outputs[0]]
        choice = self.table_choice(group, arrays, owner) or \
            self.table_carried_choice(group, arrays, owner)
        carried = self.take_carried(group, None if choice is None else choice.step_ranks)
        if choice is None:
            return self.table_owner_computes(group, arrays)
        return self.table_partial(group, owner, arrays, choice.step_ranks, choice.order,
                                  carried)

    def missing(self, exec_owner, codes):
        """outside(exec_owner, code) for an array of owner codes."""
        single = codes >= 0
        if exec_owner >= 0:
            found = (single & (codes != exec_owner)).astype(np.int64)
        elif exec_owner == REPLICATED:
            found = single * np.int64(self.nranks - 1)
        else:
            members = self.groups[group_of(exec_owner)]
            found = single * (len(members) - np.isin(codes, members))
        grouped = codes < REPLICATED
        if grouped.any():   # a few distinct mesh groups: outside's memo by pair of codes
            unique, inverse = np.unique(codes[grouped], return_inverse=True)
            found[grouped] = np.array([self.outside(exec_owner, code)
                                       for code in unique.tolist()], np.int64)[inverse]
        return found

    def holds(self, ranks, codes):
        """Is each of `ranks` (an array, or one rank) among the ranks its owner code
        names (elementwise)?"""
        found = (codes == ranks) | (codes == REPLICATED)
        grouped = codes < REPLICATED
        if grouped.any():
            found[grouped] = self.membership[group_of(codes[grouped]),
                                             np.broadcast_to(ranks, codes.shape)[grouped]]
        return found

    def first_holders(self, codes):
        """ranks_of_owner(code)[0] of an array of owner codes (a tile's sender)."""
        found = np.where(codes == REPLICATED, 0, codes)
        grouped = codes < REPLICATED
        if grouped.any():
            found[grouped] = self.group_firsts[group_of(codes[grouped])]
        return found

    @cached_property
    def membership(self):
        """(mesh group, rank) -> is the rank in the group."""
        table = np.zeros((len(self.groups), self.nranks), bool)
        for index, members in enumerate(self.groups):
            table[index, list(members)] = True
        return table

    @cached_property
    def group_firsts(self):
        """The first rank of each mesh group."""
        return np.array([members[0] for members in self.groups], np.int64)

    def table_choice(self, group, arrays, owner):
        """PartialSums.partial_choice over the arrays: a PartialChoice or None."""
        op = group.op
        if self.deterministic or len(group.steps) < 2 or op.spec.combine is None:
            return None
        terms, firsts, positions, sources = [], [], [], []
        for position in range(arrays.codes.shape[1]):
            first = arrays.firsts[position]
            missing = self.missing(owner, arrays.codes[first, position])
            kept = missing != 0
            if kept.any():
                sharing = self.sharing(op, position, group.coord, owner)
                terms.append(missing[kept] * arrays.nbytes[first[kept], position] / sharing)
                firsts.append(first[kept])
                positions.append(np.full(len(terms[-1]), position))
                sources.append(arrays.codes[first[kept], position])
        if not terms:
            return None
        # the keys in the order the step-by-step walk first meets them, summed in turn
        order = np.lexsort((np.concatenate(positions), np.concatenate(firsts)))
        owner_cost = float(np.cumsum(np.concatenate(terms)[order])[-1])
        best_ranks = self.signature_ranks if arrays.by_signature else self.best_ranks
        step_ranks = best_ranks(group, arrays, owner, self.wide_positions(group),
                                group.outputs[0])
        tree, messages = self.tree_order(step_ranks, owner,
                                         tree_text(op.name, group.outputs[0]))
        if len(np.unique(self.first_holders(np.concatenate(sources)))) > FAN_LIMIT:
            return PartialChoice(step_ranks, tree)
        fetched = 0
        for position, tiles in enumerate(arrays.tiles):
            away = ~self.holds(step_ranks, arrays.codes[:, position])
            pairs = step_ranks[away] * tiles + arrays.ids[away, position]
            _, first = np.unique(pairs, return_index=True)
            fetched += int(arrays.nbytes[away, position][first].sum())
        partial_cost = fetched + messages * self.meta[group.outputs[0]].nbytes
        return PartialChoice(step_ranks, tree) if partial_cost < owner_cost else None

    def table_carried_choice(self, group, arrays, owner):
        """CarriedPartials.carried_choice over the arrays."""
        carried = self.carried_to(group)
        if carried is None:
            return None
        best_ranks = self.signature_ranks if arrays.by_signature else self.best_ranks
        step_ranks = best_ranks(group, arrays, owner, self.wide_positions(group),
                                group.outputs[0])
        fetches = not self.holds(step_ranks[:, None], arrays.codes).all()
        if not self.adds_into_carried(carried, owner, step_ranks.tolist(), fetches,
                                      np.unique(arrays.codes).tolist()):
            return None
        tree, _ = self.tree_order(step_ranks, owner, tree_text(group.op.name,
                                                                group.outputs[0]))
        return PartialChoice(step_ranks, tree)

    def signature_ranks(self, group, arrays, preferred, wide, out_key):
        """PartialSums.best_rank of every step, by its memo's signature (owner codes,
        bytes and column codes of the inputs), read here from the arrays: a step is
        built only for a signature never seen (PERF: every row's groups repeat them)."""
        rows = np.concatenate([arrays.codes, arrays.nbytes, arrays.columns], 1).tolist()
        out_column = self.column_of(out_key) if out_key[0] in self.columns else None
        n_inputs, steps, memo = arrays.codes.shape[1], group.steps, self.signature_memo
        ranks = []
        for index, row in enumerate(rows):
            signature = (preferred, wide, out_column, tuple(row))
            found = memo.get(signature)
            if found is None:
                found = memo[signature] = self.best_rank(steps[index].keys[:n_inputs],
                                                         preferred, wide, out_key)
            ranks.append(found)
        return np.array(ranks, np.int64)

    def best_ranks(self, group, arrays, preferred, wide, out_key=None):
        """PartialSums.best_rank of every step (its keys are distinct: distinct tensors)."""
        codes, nbytes = arrays.scored, arrays.nbytes
        single = arrays.codes >= 0
        valid = (single & ~np.array(wide, bool)) | arrays.forced
        valid = np.where(valid.any(1)[:, None], valid, single)   # all wide: bytes decide
        same = (codes[:, :, None] == codes[:, None, :]) & valid[:, None, :]
        scores = np.where(valid, (same * nbytes[:, None, :]).sum(2), -1)
        best = valid & (scores == scores.max(1)[:, None])
        lowest = np.where(best, codes, NO_RANK).min(1)
        if out_key is not None and out_key[0] in self.columns:
            # then the output's column (its first member among the best), then the lowest
            members = self.groups[group_of(self.column_of(out_key))]
            inside = np.where(best & np.isin(codes, members), codes, NO_RANK).min(1)
            lowest = np.where(inside < NO_RANK, inside, lowest)
        if preferred >= 0:
            chosen = np.where((best & (codes == preferred)).any(1), preferred, lowest)
        elif preferred == REPLICATED:
            chosen = lowest
        else:   # the first member of the preferred mesh group among the best
            members = np.array(self.groups[group_of(preferred)], np.int64)
            place = np.full(self.nranks, NO_RANK)
            place[members] = np.arange(len(members))
            first = np.where(best, place[np.where(valid, codes, 0)], NO_RANK).min(1)
            chosen = np.where(first < NO_RANK, members[np.minimum(first, len(members) - 1)],
                              lowest)
        return np.where(valid.any(1), chosen, self.ranks_of_owner(preferred)[0])

    def tree_order(self, step_ranks, owner, text):
        """PartialSums.partial_plan's tree order and message count."""
        ranks = np.unique(step_ranks)
        if owner == REPLICATED:
            ranks = self.spread_array(ranks, text) if len(ranks) > FAN_LIMIT else \
                np.array(rotated(ranks.tolist(), text), np.int64)   # replicated_order
            return ranks, len(ranks) - 1 + self.nranks - 1
        if owner < 0:
            members = self.groups[group_of(owner)]
            inside = np.isin(ranks, members)
            order = np.concatenate([np.array(rotated(ranks[inside].tolist(), text), np.int64),
                                    ranks[~inside]])
            return order, len(order) - 1 + len(members) - int(bool(inside.any()))
        order = np.concatenate([[owner], self.spread_array(ranks[ranks != owner], text)])
        return order, len(order) - 1

    def spread_array(self, ranks, text):
        """PartialSums.spread_order of a sorted array of ranks."""
        if len(ranks) <= FAN_LIMIT:
            return ranks
        start = zlib.crc32(text.encode()) % self.nranks
        return ranks[np.argsort((ranks - start) % self.nranks, kind="stable")]

    def table_owner_computes(self, group, arrays):
        """Every step on the output's owners: a runner walks them all, another rank
        only the steps reading a tile it sends; the others just advance versions."""
        ranks = list(self.ranks_of(group.outputs[0]))
        steps, me = group.steps, self.rank
        if me in ranks:
            for index, step in enumerate(steps):
                self.run_step(ranks, group, step, index, step.keys)
            return
        # the steps reading a tile this rank may send (it holds it: sender_of decides)
        sending = self.holds(me, arrays.codes) & (arrays.codes != REPLICATED)
        done = 0
        for index in np.flatnonzero(sending.any(1)).tolist():
            self.advance(group.outputs, index - done)
            self.run_step(ranks, group, steps[index], index, steps[index].keys)
            done = index + 1
        self.advance(group.outputs, len(steps) - done)

    def advance(self, keys, writes):
        """Versions after `writes` steps this rank does not walk."""
        if writes:
            version = self.version
            for key in keys:
                version[key] = version.get(key, -1) + writes

    def table_partial(self, group, owner, arrays, step_ranks, order, carried=None):
        """ProgramBuilder.run_partial for this rank's steps and tree merges."""
        op, out_key, me = group.op, group.outputs[0], self.rank
        keys_op, order = (op, order) if carried is None else \
            (carried.keys_op, np.array(carried.order, np.int64))
        n_inputs, root, steps = len(op.inputs), int(order[0]), group.steps
        by_rank = np.argsort(step_ranks, kind="stable")
        runs = np.empty(len(steps), np.int64)   # steps each rank ran before this one
        sorted_ranks = step_ranks[by_rank]
        starts = np.searchsorted(sorted_ranks, sorted_ranks)
        runs[by_rank] = np.arange(len(steps)) - starts + (carried is not None)
        # follows_step: this rank runs the step or an input's owner code names it
        concerned = (step_ranks == me) | self.holds(me, arrays.codes).any(1)
        if me in self.rank_set(owner):   # the root's steps read the output (follows_step)
            concerned |= step_ranks == root
        for index in np.flatnonzero(concerned).tolist():
            rank, step, count = int(step_ranks[index]), steps[index], int(runs[index])
            keys = step.keys if rank == root else \
                step.keys[:n_inputs] + (self.temp_key(keys_op, out_key, rank),)
            self.run_step([rank], group, step, count, keys,
                          zero_beta=rank != root and count == 0)
        self.carry_or_reduce(Reduction(op, keys_op, out_key, owner, tuple(order.tolist()),
                                       group.reads_output_first),
                             step_ranks.tolist(), bool((step_ranks == root).any()))

    def reduce_partials(self, reduction, root_has_value):
        """ProgramBuilder.reduce_partials: this rank's merges and broadcast hops."""
        order = list(reduction.order)
        if self.rank in order:
            self.my_merges(reduction, order.index(self.rank), root_has_value)
        if reduction.owner < 0:
            self.broadcast_to_group(reduction.out_key, order[0], reduction.op.name)

    def my_merges(self, reduction, position, root_has_value):
        """This rank's merges in the binomial tree up the order (reduce_partials' loop)."""
        op, keys_op, out_key, _, order, reads_output_first = reduction
        root = order[0]
        stride = 1
        while stride < len(order):
            if position % (2 * stride) == 0 and position + stride < len(order):
                parent, child = order[position], order[position + stride]
            elif position % (2 * stride) == stride:
                parent, child = order[position - stride], order[position]
            else:
                stride *= 2
                continue
            beta = 1.0
            if parent == root and stride == 1 and not root_has_value:
                beta = op.attrs.get(op.spec.beta_attr, 0.0)
                beta = beta if reads_output_first else 0.0
            parent_key = out_key if parent == root else self.temp_key(keys_op, out_key, parent)
            self.combine(parent, self.temp_key(keys_op, out_key, child), parent_key, beta, op)
            if child == self.rank:
                return   # merged into its parent: done
            stride *= 2

    def broadcast(self, key, root, op_name, targets, ordered=False):
        """ProgramBuilder.broadcast's hops from or to this rank, found by position."""
        order = [root] + [rank for rank in targets if rank != root] if ordered else \
            self.hop_order(key, root, op_name, targets)
        if self.rank not in order:
            return
        position, stride = order.index(self.rank), 1
        while stride < len(order):
            if position < stride and position + stride < len(order):
                self.transfer(key, self.rank, order[position + stride], op_name)
            elif stride <= position < 2 * stride:
                self.transfer(key, order[position - stride], self.rank, op_name)
            stride *= 2
