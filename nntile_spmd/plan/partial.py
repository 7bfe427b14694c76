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
"""

from __future__ import annotations

import numpy as np

from .axes import op_axes
from .distribution import REPLICATED


class PartialSums:
    """Mixin of the program builders: needs nranks, groups, owner, owners, meta."""

    def rank_set(self, owner) -> frozenset:
        """The ranks an owner code names, as a set (memoized per code)."""
        found = self.rank_sets.get(owner)
        if found is None:
            found = self.rank_sets[owner] = frozenset(
                (owner,) if owner >= 0 else
                range(self.nranks) if owner == REPLICATED else self.groups[-2 - owner])
        return found

    def outside(self, exec_owner, key_owner) -> int:
        """How many ranks of `exec_owner` are not ranks of `key_owner` (must fetch)."""
        if key_owner == REPLICATED or exec_owner == key_owner:
            return 0
        holders = self.rank_set(key_owner)
        if exec_owner >= 0:
            return int(exec_owner not in holders)
        runners = self.rank_set(exec_owner)
        return len(runners) - len(runners & holders)

    def partial_choice(self, group):
        """(step ranks, tree order) when partial sums cost fewer bytes, else None."""
        op = group.op
        if self.deterministic or len(group.steps) < 2 or op.spec.combine is None:
            return None   # owner sums in tile order / nothing to choose / steps overwrite
        owner_of, meta = self.owner, self.meta
        out_key = group.outputs[0]
        owner = owner_of[out_key]
        n_inputs = len(op.inputs)
        positions = {}
        for step in group.steps:
            for position, key in enumerate(step.keys[:n_inputs]):
                positions.setdefault(key, position)
        owner_cost = 0.0
        for key, position in positions.items():
            missing = self.outside(owner, owner_of[key])
            if missing:
                owner_cost += missing * meta[key].nbytes / self.sharing(
                    op, position, group.coord, owner)
        if owner_cost == 0:
            return None
        step_ranks, order, messages = self.partial_plan(group, owner)
        fetched = {(rank, key) for step, rank in zip(group.steps, step_ranks)
                   for key in step.keys[:n_inputs] if self.outside(rank, owner_of[key])}
        partial_cost = sum(meta[key].nbytes for _, key in fetched) + \
            messages * meta[out_key].nbytes
        return (step_ranks, order) if partial_cost < owner_cost else None

    def sharing(self, op, position, coord, owner) -> int:
        """Groups of `op` with the same owner whose output tiles meet input `position`'s
        tile in every output axis it has (they read that tile too)."""
        memo_key = (op.name, position, coord, owner)
        count = self.sharing_memo.get(memo_key)
        if count is None:
            labels = self.op_labels.get(op.name)
            if labels is None:
                axes = op_axes(op)
                labels = self.op_labels[op.name] = (axes, len(op.inputs))
            axes, n_inputs = labels
            index = tuple(coord[dim] if label in axes[position] else slice(None)
                          for dim, label in enumerate(axes[n_inputs]))
            owners = self.owners[op.outputs[0].name]
            count = self.sharing_memo[memo_key] = max(
                1, int(np.count_nonzero(owners[index] == owner)))
        return count

    def partial_plan(self, group, owner):
        """Step ranks (each step next to most of its input bytes), tree order, messages."""
        n_inputs = len(group.op.inputs)
        step_ranks = [self.best_rank(step.keys[:n_inputs], owner) for step in group.steps]
        if owner == REPLICATED:
            order = sorted(set(step_ranks))
            messages = len(order) - 1 + self.nranks - 1
        elif owner < 0:   # a mesh group: reduce to a member if one computes, broadcast there
            members = set(self.groups[-2 - owner])
            order = sorted(set(step_ranks) & members) + sorted(set(step_ranks) - members)
            messages = len(order) - 1 + len(members) - (order[0] in members)
        else:
            order = [owner] + sorted(set(step_ranks) - {owner})
            messages = len(order) - 1
        return step_ranks, order, messages

    def best_rank(self, keys, preferred):
        """The rank owning most bytes of `keys` (a replicated tile counts alike on every
        rank, so it decides nothing); ties go to the ranks of owner code `preferred` in
        their order, then to the lowest rank."""
        score = {}
        for key in set(keys):
            owner = self.owner[key]
            if owner == REPLICATED:
                continue
            nbytes = self.meta[key].nbytes
            for rank in self.ranks_of_owner(owner):
                score[rank] = score.get(rank, 0) + nbytes
        if not score:
            return self.ranks_of_owner(preferred)[0]
        top = max(score.values())
        best = {rank for rank in score if score[rank] == top}
        if preferred != REPLICATED:   # every rank is preferred: rank order decides
            for rank in self.ranks_of_owner(preferred):
                if rank in best:
                    return rank
        return min(best)
