"""Plan layer: owner computes or partial sums, decided per task group from static facts.

A group with several steps (gemm's K loop) either runs every step on the output
tile's owner, which fetches the inputs it lacks, or runs each step next to most of
its input bytes and reduces the partial results to the owner in a fixed tree. The
choice reads only owners, tile sizes and the group itself, never which copies the
walk has fetched so far: a rank planning alone does not know that about the other
ranks, and every rank that takes part in a group must take the same decision.
Both builders inherit this class, so they agree by construction.

Fetches an owner makes are shared by the op's other groups on that owner reading
the same input tile (`C = A @ B` with A, C on rank 0 and B on rank 1: B moves once
for every row of C), so the owner's cost of a fetch is divided by the number of
such groups, counted from the output's owner array.

Two rules keep a rank's share of a group bounded whatever the number of ranks
(at 1,024 ranks, without them, the owner of a vocabulary tile fetched an input from every
rank, and ran every rank's partial step next to its tile):

- bounded fan-in: when owner computes would fetch from more than FAN_LIMIT ranks, the
  group is reduced in the tree instead (the owner receives log2 of them, each rank
  sends one partial), whatever the bytes compare;
- a tile that the op's output tiles on more than FAN_LIMIT ranks read (a weight every
  batch tile reads) does not draw steps to its owner: it counts like a replicated tile
  in best_rank (unless every tile of the step is such), else its owner would run a
  step for every one of those ranks;
- a tree of more than FAN_LIMIT ranks starts its order (after its root) at a rank drawn
  from the op and tile (spread_order), so that the ranks near the roots, which merge
  and forward the most, differ from tile to tile instead of being the lowest ranks of
  every tree. Smaller trees keep rank order.

On a mesh, where the tp axis splits a layer and the batch axis gathers each fsdp
shard, two more keep the rows' share flat at a fixed tp width:

- a shard counts on the rank of its tp column that holds the output tile (its
  gathered copy is there), so a vocabulary-parallel embedding or a row-parallel gemm
  sums on the row's rank of each column and the row reduces the partials (Megatron's
  all-reduce), and a shard of a gradient prefers, among tied ranks, its column's;
- a mesh group's reduction starts at a member drawn from op and tile (rotated), so
  the broadcasts that follow it are not all sent by the row's first rank; a replicated
  tile's reduction over up to FAN_LIMIT step ranks likewise (replicated_order).
"""

from __future__ import annotations

import itertools
import zlib

import numpy as np

from .accumulate import PartialChoice
from .axes import op_axes
from .distribution import REPLICATED, group_of
from .instructions import key_str
from .lowering import ViewReadingOp

FAN_LIMIT = 8   # most ranks one rank exchanges a group's tiles with before a tree takes over


class PartialSums:
    """Mixin of the program builders: needs nranks, groups, owner, owners, meta."""

    def rank_set(self, owner) -> frozenset:
        """The ranks an owner code names, as a set (memoized per code)."""
        found = self.rank_sets.get(owner)
        if found is None:
            found = self.rank_sets[owner] = frozenset(
                (owner,) if owner >= 0 else
                range(self.nranks) if owner == REPLICATED else self.groups[group_of(owner)])
        return found

    def sender_of(self, code, target) -> int:
        """The rank that sends a tile of owner `code` to `target`: its owner (rank 0 for
        a replicated one), and for a mesh group the member sharing `target`'s index
        along the group's inner axis (members `stride` apart: `target // stride` modulo
        the group's size), so all members serve a group's readers (a tp row's tile goes
        to each reader from the row's rank in the reader's tp column, a dp column's
        from the column's rank in the reader's row) and each member knows the copies
        it hands out, as every reader has one sender."""
        if code >= REPLICATED:
            return max(code, 0)
        members = self.groups[group_of(code)]
        if len(members) == 1:   # an axis of size 1
            return members[0]
        return members[target // (members[1] - members[0]) % len(members)]

    def outside(self, exec_owner, key_owner) -> int:
        """How many ranks of `exec_owner` are not ranks of `key_owner` (must fetch)."""
        if key_owner == REPLICATED or exec_owner == key_owner:
            return 0
        if exec_owner >= 0 and key_owner >= 0:
            return 1
        found = self.outside_memo.get((exec_owner, key_owner))
        if found is None:   # PERF: a mesh group's set operations, once per pair of codes
            holders = self.rank_set(key_owner)
            if exec_owner >= 0:
                found = int(exec_owner not in holders)
            else:
                runners = self.rank_set(exec_owner)
                found = len(runners) - len(runners & holders)
            self.outside_memo[(exec_owner, key_owner)] = found
        return found

    def partial_choice(self, group):
        """A PartialChoice when partial sums cost fewer bytes, else None."""
        op = group.op
        if self.deterministic or len(group.steps) < 2 or op.spec.combine is None:
            return None   # owner sums in tile order / nothing to choose / steps overwrite
        owner_of, meta, outside = self.owner, self.meta, self.outside
        out_key = group.outputs[0]
        owner = owner_of[out_key]
        n_inputs = len(op.inputs)
        names = {tensor.name: position for position, tensor in enumerate(op.inputs)}
        if len(names) == n_inputs and not isinstance(op, ViewReadingOp):
            # PERF: a key's position is its tensor's (a view's keys name other tensors)
            first_met = dict.fromkeys(itertools.chain.from_iterable(
                [step.keys[:n_inputs] for step in group.steps]))
            positions = [(key, names[key[0]]) for key in first_met]
        else:
            positions = {}
            for step in group.steps:
                for position, key in enumerate(step.keys[:n_inputs]):
                    positions.setdefault(key, position)
            positions = positions.items()
        owner_cost, sources, shares = 0.0, set(), {}
        for key, position in positions:
            code = owner_of[key]
            missing = outside(owner, code)
            if missing:
                sharing = shares.get(position)   # the same for every key of a position
                if sharing is None:
                    sharing = shares[position] = self.sharing(op, position, group.coord,
                                                              owner)
                owner_cost += missing * meta[key].nbytes / sharing
                sources.add(self.ranks_of_owner(code)[0])
        if owner_cost == 0:
            return None
        step_ranks, order, messages = self.partial_plan(group, owner)
        if len(sources) > FAN_LIMIT:
            return PartialChoice(step_ranks, order)
        fetched = {(rank, key) for step, rank in zip(group.steps, step_ranks)
                   for key in step.keys[:n_inputs] if outside(rank, owner_of[key])}
        partial_cost = sum(meta[key].nbytes for _, key in fetched) + \
            messages * meta[out_key].nbytes
        return PartialChoice(step_ranks, order) if partial_cost < owner_cost else None

    def sharing(self, op, position, coord, owner) -> int:
        """Groups of `op` with the same owner whose output tiles meet input `position`'s
        tile in every output axis it has (they read that tile too)."""
        index = self.reader_index(op, position, coord)
        memo_key = (op.name, position, index_key(index), owner)
        count = self.sharing_memo.get(memo_key)
        if count is None:
            owners = self.owners[op.outputs[0].name]
            count = self.sharing_memo[memo_key] = max(
                1, int(np.count_nonzero(owners[index] == owner)))
        return count

    def widely_read(self, op, position, coord) -> bool:
        """Do the op's output tiles reading input `position`'s tile (the one group
        `coord` reads) have more than FAN_LIMIT owners, not every one of which meets
        the input's owners (held_by_readers)?"""
        index = self.reader_index(op, position, coord)
        memo_key = (op.name, position, index_key(index), "wide")
        wide = self.sharing_memo.get(memo_key)
        if wide is None:
            # owner codes, not ranks: one replicated group runs its steps once
            codes = np.unique(self.owners[op.outputs[0].name][index])
            wide = self.sharing_memo[memo_key] = len(codes) > FAN_LIMIT and \
                not self.held_by_readers(op.inputs[position].name, codes)
        return wide

    def held_by_readers(self, name, reader_codes) -> bool:
        """Is every tile of `name` held by a mesh group meeting every owner code of
        `reader_codes` (a dp x tp weight: its tp column meets every dp row)? Then a
        step reading it can run on the reader's row's member of its group, with no
        fetch: it need not count like a replicated tile in best_rank (at 1,024 ranks
        the vocabulary-parallel embedding's steps all went to each row's first rank,
        which fetched the 7 other columns' shares of the vocabulary matrix)."""
        codes = self.tensor_codes.get(name)
        if codes is None:
            codes = self.tensor_codes[name] = np.unique(self.owners[name])
        return bool(codes.max() < REPLICATED) and all(
            self.meets_every(int(code), reader_codes) for code in codes.tolist())

    def reader_index(self, op, position, coord) -> tuple:
        """Index of the output tiles that read input `position`'s tile of group `coord`."""
        labels = self.op_labels.get(op.name)
        if labels is None:
            labels = self.op_labels[op.name] = (op_axes(op), len(op.inputs))
        axes, n_inputs = labels
        return tuple(coord[dim] if label in axes[position] else slice(None)
                     for dim, label in enumerate(axes[n_inputs]))

    def wide_positions(self, group) -> tuple:
        """widely_read of each input position of the group."""
        return tuple(self.widely_read(group.op, position, group.coord)
                     for position in range(len(group.op.inputs)))

    def partial_plan(self, group, owner):
        """Step ranks (each step next to most of its input bytes), tree order, messages."""
        n_inputs = len(group.op.inputs)
        wide = self.wide_positions(group)
        out_key = group.outputs[0]
        step_ranks = [self.best_rank(step.keys[:n_inputs], owner, wide, out_key)
                      for step in group.steps]
        order, messages = self.tree_plan(step_ranks, owner,
                                         tree_text(group.op.name, group.outputs[0]))
        return step_ranks, order, messages

    def tree_plan(self, step_ranks, owner, text):
        """The reduction tree's order over the step ranks (root first) and its
        message count, the broadcast to a replicated or mesh-group owner included."""
        spread = self.spread_order
        if owner == REPLICATED:
            order = self.replicated_order(sorted(set(step_ranks)), text)
            messages = len(order) - 1 + self.nranks - 1
        elif owner < 0:   # a mesh group: reduce to a member if one computes, broadcast there
            members = self.rank_set(owner)
            order = rotated(sorted(set(step_ranks) & members), text) + \
                sorted(set(step_ranks) - members)
            messages = len(order) - 1 + len(members) - (order[0] in members)
        else:
            order = [owner] + spread(sorted(set(step_ranks) - {owner}), text)
            messages = len(order) - 1
        return order, messages

    def replicated_order(self, ranks, text):
        """The tree order of a replicated tile's reduction: up to FAN_LIMIT step ranks
        rotated to start at one drawn from `text`, so that the root, which then sends
        log2(N) copies of the broadcast to every rank, moves from tile to tile (a
        position embedding's gradient, summed on each dp row's first rank, was rooted
        at rank 0 for every tile); more spread as spread_order."""
        return rotated(ranks, text) if len(ranks) <= FAN_LIMIT else \
            self.spread_order(ranks, text)

    def spread_order(self, ranks, text):
        """`ranks` (sorted) in tree order: as they are up to FAN_LIMIT, else rotated to
        start at a rank drawn from `text` (crc32: the same in every process)."""
        if len(ranks) <= FAN_LIMIT:
            return ranks
        start = zlib.crc32(text.encode()) % self.nranks
        return sorted(ranks, key=lambda rank: (rank - start) % self.nranks)

    def hop_order(self, key, root, op_name, targets) -> list:
        """A broadcast's ranks, its root first (ProgramBuilder.broadcast's tree)."""
        return [root] + self.spread_order([rank for rank in targets if rank != root],
                                          tree_text(op_name, key))

    def column_of(self, key):
        """The column code of a mesh's fsdp shard (plan/mesh.py column_layout)."""
        return int(self.columns[key[0]][key[1]])

    def shard_ranks(self, key, out_owner) -> tuple:
        """The ranks of a shard's column among those of `out_owner` (the output tile's
        owner code), sorted: where a step reading it may use the gathered copy. One
        rank on an fsdp x tp grid (the tile's tp column meets the output's row);
        empty where the output lies outside the column."""
        return self.column_ranks(self.column_of(key), out_owner)

    def column_ranks(self, code, out_owner) -> tuple:
        """shard_ranks of a shard in column `code`."""
        memo_key = (code, out_owner)
        found = self.shard_memo.get(memo_key)
        if found is None:
            found = self.shard_memo[memo_key] = tuple(sorted(
                self.rank_set(code) & self.rank_set(out_owner)))
        return found

    def broadcast_to_group(self, key, root, op_name):
        """A reduced tile from its root to the rest of its mesh group: a binomial tree
        over the members from the root on, wrapping, so that the members forwarding
        most are those after a root drawn per tile (rotated), not the lowest ones."""
        members = list(self.ranks_of(key))
        if root in members:
            start = members.index(root)
            self.broadcast(key, root, op_name, members[start:] + members[:start],
                           ordered=True)
        else:
            self.broadcast(key, root, op_name, members)

    def best_rank(self, keys, preferred, wide, out_key=None):
        """scored_rank of `keys`, memoized by what it reads of them: each key's owner
        code, bytes, wideness and column (PERF: a key owned by a mesh group scores on
        every rank of it, and a long group's steps repeat a few such signatures)."""
        if len(set(keys)) < len(keys):   # a key read twice counts once: not by signature
            return self.scored_rank(keys, preferred, wide, out_key)
        owner_of, meta, columns = self.owner, self.meta, self.columns
        signature = (preferred, wide,
                     self.column_of(out_key) if out_key is not None and out_key[0] in columns
                     else None,
                     tuple([(owner_of[key], meta[key].nbytes,
                             self.column_of(key) if key[0] in columns else None)
                            for key in keys]))
        found = self.best_memo.get(signature)
        if found is None:
            found = self.best_memo[signature] = self.scored_rank(keys, preferred, wide,
                                                                 out_key)
        return found

    def scored_rank(self, keys, preferred, wide, out_key=None):
        """The rank owning most bytes of `keys` (a replicated tile counts alike on every
        rank, so it decides nothing, and so does a widely read one unless all are);
        a mesh's fsdp shard counts on its shard_ranks, where it is gathered to, if
        any. Ties go to the ranks of owner code `preferred` (the output's) in their
        order, then to those of the column of `out_key` (a shard of a gradient: the
        rank of each row that its column's reduction starts from), then to the
        lowest rank."""
        score, owner_of, columns = {}, self.owner, self.columns
        deciding = {}   # a key read twice (x^T x) counts once
        for key, is_wide in zip(keys, wide):
            if key[0] in columns:
                ranks = self.shard_ranks(key, preferred)
                if ranks:
                    deciding[key] = ranks
                    continue
            owner = owner_of[key]
            if not is_wide and owner != REPLICATED:
                deciding[key] = self.ranks_of_owner(owner)
        if not deciding:   # all widely read: bytes decide as before
            deciding = {key: self.ranks_of_owner(owner_of[key]) for key in keys
                        if owner_of[key] != REPLICATED}
        for key, ranks in deciding.items():
            nbytes = self.meta[key].nbytes
            for rank in ranks:
                score[rank] = score.get(rank, 0) + nbytes
        if not score:
            return self.ranks_of_owner(preferred)[0]
        top = max(score.values())
        best = {rank for rank in score if score[rank] == top}
        if preferred != REPLICATED:   # every rank is preferred: rank order decides
            for rank in self.ranks_of_owner(preferred):
                if rank in best:
                    return rank
        if out_key is not None and out_key[0] in columns:
            for rank in self.ranks_of_owner(self.column_of(out_key)):
                if rank in best:
                    return rank
        return min(best)


def index_key(index) -> tuple:
    """A reader_index as a memo key (PERF: the groups reading one input tile share
    it, where a key by the group's own coordinate was computed once per group)."""
    return tuple([None if isinstance(part, slice) else part for part in index])


def rotated(ranks, text) -> list:
    """`ranks` from the one at a position drawn from `text` on (crc32), wrapping: the
    root of a mesh group's reduction and broadcast (a tp row's all-reduce) moves from
    tile to tile, so the members share the root's sends as a ring's ranks do,
    instead of the row's first rank sending every tile's broadcast."""
    if len(ranks) < 2:
        return list(ranks)
    start = zlib.crc32(text.encode()) % len(ranks)
    return list(ranks[start:]) + list(ranks[:start])


def tree_text(op_name, key) -> str:
    """What a tree's start is drawn from: the op and the tile it reduces or sends."""
    return f"{op_name}|{key_str(key)}"
