"""Plan layer: a tile that many ranks read in one op reaches them down a binomial tree.

Without it the owner of a weight tile sends one copy to every rank that runs a group
reading it, N - 1 sends of the tile per op (FSDP's all-gather from a single source: at
1,024 ranks rank 0 sent nearly all the traffic). When the op's output tiles reading an
input tile have more than FAN_LIMIT owners, the tile is broadcast before the op's
groups: its owner sends it to one member, the root of a binomial tree over the
members, each forwarding the copy it received, so a rank sends at most log2(N)
copies of one tile and, over many tiles, about one each on average (each tree's
order starts at another head: send_down_tree).

The readers are static facts (the owner arrays), so every rank of the tree derives
the same tree alone. They are the ranks that run the op's groups only where those
groups run on their output's owners: groups of one step, or of steps that cannot be
moved (deterministic plans, ops without a combine), or where the tile is persistent
(a parameter: plan/partial.py never draws steps to a widely read tile, and a group's
other inputs are then where the output is). A copy the tree sent to a rank that
already held it current replaces it (the executor and plan/memory.py allow that).
A tile is gathered once per phase while nothing writes it, as ZeRO-3 gathers a weight
once for the forward pass and once for the backward: a later op's tree of the same
phase leaves out the members an earlier tree gave the tile to (fresh_members), which
still hold it (a received tile stays until its last use). A new phase gathers anew, so
no gathered copy lives from the forward pass into the backward (the fsdp preset's
peak would take every weight read in both), except a mesh's fsdp shard across the
phases' seam: where no tree of any tile went out since the last op reading it (fsdp x
tp's tied vocabulary matrix, read by the logits gemm at the forward's end and by its
input's gradient at the backward's start, with only the loss and the logits gemm's
weight gradient between), its column's copies stay for the next phase's op instead of
being dropped and gathered again a few ops later; no other gathered weight lives
meanwhile. Only a shard's: there each rank holds its column's share, and its gradient's
partials, carried to the embedding (plan/accumulate.py), live beside the copy at the
backward's first read anyway; the fsdp preset's whole-matrix copy would live across
the logits gemm's weight gradient (its peak: docs/benchmarks.md). Which ranks an
earlier tree reached, whether an op wrote the tensor since and how many trees went out
are read from the walk alone (every rank walks every op's trees), so every member
derives the same shorter tree.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .axes import op_axes
from .distribution import REPLICATED
from .partial import FAN_LIMIT


FIBONACCI_HASH = 2654435761   # 2^32 / golden ratio: consecutive trees' heads spread evenly


class TreeCopies(NamedTuple):
    """Who holds a tile that gather trees gave out, and when they got it."""

    writes: int          # the ops that had written its tensor by then
    phase: str           # the phase of the op whose tree it was
    holders: frozenset   # the ranks the trees reached
    trees_after: int     # gathers_so_far after that op's tree


class TreeGathers:
    """Mixin of the program builders: needs PartialSums, broadcast, meta and owners."""

    gathers_so_far = 0   # every rank counts every op's trees alike: it picks their heads

    def gather_widely_read(self, op, view_names=frozenset()):
        """Broadcast every input tile of `op` that output tiles of more than
        FAN_LIMIT owners read down a tree from its owner, before the op's groups."""
        if op.spec.windows is not None:
            return
        axes = op_axes(op)
        if any(len(set(labels)) != len(labels) for labels in axes):
            return   # a label twice in one array: the readers are not a slice
        n_inputs = len(op.inputs)
        out_labels = axes[n_inputs]
        out_owners = self.owners[op.outputs[0].name]
        fixed_steps = self.deterministic or op.spec.combine is None or self.one_step(
            op, axes)
        seen = set()
        for tensor, labels in zip(op.inputs, axes[:n_inputs]):
            if tensor.name in view_names or tensor.name in seen:
                continue
            seen.add(tensor.name)
            if not (fixed_steps or tensor.persistent):
                continue
            for coord, members in self.tree_members(tensor.name, labels, out_labels,
                                                    out_owners, not fixed_steps):
                key = (tensor.name, coord)
                self.check_written(key, op.name)
                # a mesh group's tile leaves from its first rank; every member notes
                # the tree's copies (note_gathered), as any of them may send it later
                owner = self.ranks_of_owner(int(self.owners[tensor.name][coord]))[0]
                fresh = self.fresh_members(key, members, op.phase)
                if fresh:
                    self.send_down_tree(key, owner, op.name, fresh)
                    self.note_gathered(key, owner, fresh)

    def fresh_members(self, key, members, phase) -> list:
        """The members no earlier tree gave this tile since an op last wrote its tensor,
        in this phase, or, for a mesh's fsdp shard, in an earlier one where no tree
        of any tile went out since the last op reading this tile; notes that all
        `members` hold it after this op's tree."""
        writes = self.tensor_writes.get(key[0], 0)
        earlier = self.tree_copies.get(key)
        reached = frozenset()
        if earlier is not None and earlier.writes == writes and (
                earlier.phase == phase or
                (earlier.trees_after == self.gathers_so_far and key[0] in self.columns)):
            reached = earlier.holders
        fresh = [rank for rank in members if rank not in reached]
        # the tree count after this op's tree of the tile (send_down_tree counts it)
        self.tree_copies[key] = TreeCopies(writes, phase, reached.union(members),
                                           self.gathers_so_far + bool(fresh))
        return fresh

    def note_writes(self, op):
        """After `op`'s groups: copies that earlier trees gave of its outputs are stale
        (counted per tensor: an op may write any of its tiles)."""
        writes = self.tensor_writes
        for tensor in op.outputs:
            writes[tensor.name] = writes.get(tensor.name, 0) + 1

    def send_down_tree(self, key, owner, op_name, members):
        """The owner hands the tile to a head, the root of a binomial tree over the
        members: the owner sends one copy per op, and the copies the ranks near a
        root send fall on heads spread evenly over the members, tree after tree, and
        on the ranks after each head (a tree's order is the members from its head
        on, wrapping around)."""
        index = self.gathers_so_far
        self.gathers_so_far = index + 1
        start = (index * FIBONACCI_HASH % (1 << 32)) * len(members) >> 32
        order = members[start:] + members[:start]
        if self.follows_pair(owner, order[0]):
            self.transfer(key, owner, order[0], op_name)
        self.broadcast(key, order[0], op_name, order, ordered=True)

    def one_step(self, op, axes) -> bool:
        """Are the op's summed labels one tile each (every group one step)?"""
        out_labels = axes[len(op.inputs)]
        tilings = self.meta.tilings
        return all(tilings[tensor.name].dims[dim].num_tiles == 1
                   for tensor, labels in zip(op.inputs, axes)
                   for dim, label in enumerate(labels) if label not in out_labels)

    def tree_members(self, name, labels, out_labels, out_owners, movable=False):
        """(tile coord, ranks in tree order) of each tile of `name` held by one rank or
        a mesh group (an fsdp shard of a tp-replicated weight: a row of the mesh) and
        read by output tiles of more than FAN_LIMIT owner codes. A mesh's fsdp shard read
        by steps that can move goes to the readers in its column only: the steps
        reading it run there (PartialSums.best_rank); a mesh group's tile read so goes
        down no tree where the group meets every reader's owners (meets_every)."""
        columns = self.columns[name] if movable and name in self.columns else None
        free = [dim for dim, label in enumerate(out_labels) if label not in labels]
        if int(np.prod([out_owners.shape[dim] for dim in free])) <= FAN_LIMIT:
            return   # too few output tiles read one input tile
        owners = self.owners[name]
        held = (owners >= 0) | (owners < REPLICATED)   # one rank or a mesh group
        for coord in map(tuple, np.argwhere(held.T)[:, ::-1].tolist()):
            index = tuple(coord[labels.index(label)] if label in labels else slice(None)
                          for label in out_labels)
            codes = np.unique(np.asarray(out_owners[index]))
            if len(codes) <= FAN_LIMIT or (movable and columns is None and
                                           self.meets_every(int(owners[coord]), codes)):
                continue
            readers = set()
            for code in codes.tolist():
                readers.update(self.rank_set(code))
            if columns is not None:
                readers &= self.rank_set(int(columns[coord]))
            readers -= self.rank_set(int(owners[coord]))
            if readers:
                yield coord, sorted(readers)

    def meets_every(self, code, out_codes) -> bool:
        """Does mesh group `code` share a rank with the owners of every output tile
        (a dp x tp weight's tp column meets every dp row)? Then the steps reading its
        tile can run on its members (best_rank), and a rank that fetches it gets it
        from its own row's member (sender_of), not down a tree to every reader."""
        if code >= REPLICATED:
            return False
        memo_key = (code, out_codes.tobytes())
        found = self.meets_memo.get(memo_key)
        if found is None:
            holders = self.rank_set(code)
            found = self.meets_memo[memo_key] = all(
                holders & self.rank_set(out) for out in out_codes.tolist())
        return found

    def note_gathered(self, key, owner, members):
        """After a tree: every member holds the current version (the all-ranks
        builder's transfers noted it already)."""
