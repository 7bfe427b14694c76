"""Plan layer: partial sums carried on to the next op that adds into the same tile, so
that one reduction across ranks serves both ops.

Attention's input gradient under tp is three gemms into one tensor (dX += Wq^T dq,
+= Wk^T dk, += Wv^T dv), each summed over the heads of every tp rank: reduced op by
op, a tp row all-reduced dX three times where Megatron, whose q, k and v are one
weight, adds the three partials locally and all-reduces once. When the next op
touching an op's output after it accumulates into it (beta 1, the same combine
kernel, nothing between reads it) and a tile's partial sums lie on ranks of the
tile's owners only, those ranks keep their partials (the first op's partial-sum
tiles, the root's in the tile itself) and the next op's steps add into them, if its
steps lie on the same ranks; else, or after the next op's groups, the carried sums
are reduced as they would have been. The chains are read from the op list and the
choices from static facts, so every rank, planning alone or not, carries alike.
Deterministic plans never sum partials, so they are unchanged.

An fsdp shard of a mesh owned by one rank carries too, when its partials lie on its
column (fsdp x tp's `wte_grad`: the logits gemm's and the embedding's partials, each
summed down the tile's column, reduced once): a rank planning alone visits the next
op's group of every tile it carries a partial of (`carries`, RankTiles.coords),
whether or not it runs a step there, so it reduces the partial where the all-ranks
walk does.

A group whose mesh-group owners would compute it, fetching what each lacks, adds into
the partials carried to it instead when its steps lie on the carrying ranks and fetch
nothing (`carried_choice`): dp x tp's embedding gradient, which each rank of a dp
column summed from every row's sequence gradient, adds its own row's into the logits
gemm's partials, and the column all-reduces once.
"""

from __future__ import annotations

from typing import NamedTuple

from .distribution import REPLICATED


class Reduction(NamedTuple):
    """The tree reduction (and broadcast) of one tile's partial sums."""
    op: object             # whose combine merges and whose name the messages carry
    keys_op: object        # the op that names the partial-sum tiles (a chain's first)
    out_key: tuple
    owner: int             # the tile's owner code
    order: tuple           # tree order, root first: the ranks holding a partial
    reads_output_first: bool


class PartialChoice(NamedTuple):
    """Where a group's partial sums run: a rank per step, and the tree over them."""
    step_ranks: object     # the rank of each step (a list, or an array when planning alone)
    order: object          # tree order, root first


def accumulation_chains(ops, view_inputs=frozenset()) -> dict:
    """{op name: name of the next op of `ops` (in walk order) touching the op's output,
    where that op accumulates into it}: its only output, not read as an input, beta 1,
    the same combine kernel. Outputs that are views or viewed are left out."""
    next_toucher, chains = {}, {}
    for op in reversed(ops):
        out = op.outputs[0].name if len(op.outputs) == 1 else None
        later = next_toucher.get(out)
        if out is not None and later is not None and out not in view_inputs and \
                op.spec.combine is not None and accumulates(later, op):
            chains[op.name] = later.name
        for tensor in op.inputs + op.outputs:
            next_toucher[tensor.name] = op
    return chains


def accumulates(op, earlier) -> bool:
    """Does `op` add into `earlier`'s output with beta 1 and the same combine?"""
    spec, out = op.spec, earlier.outputs[0].name
    return len(op.outputs) == 1 and op.outputs[0].name == out and \
        all(tensor.name != out for tensor in op.inputs) and \
        spec.combine == earlier.spec.combine and spec.beta_attr is not None and \
        op.attrs.get(spec.beta_attr) == 1.0 and spec.reads_output(op.attrs)


class CarriedPartials:
    """Mixin of the program builders: needs PartialSums' rank_set, column_of,
    columns, outside, sender_of and partial_plan, and owner and reduce_partials."""

    def init_carried(self, chains):
        self.chains = chains or {}   # op name -> the next op accumulating into its output
        self.carried = {}            # that op's name -> {output key: Reduction}

    def take_carried(self, group, step_ranks):
        """The Reduction carried to this group's tile, if its partial steps (`step_ranks`,
        None: owner computes) lie on the same ranks; else the carried sums are reduced
        first and None returned."""
        waiting = self.carried.get(group.op.name)
        carried = waiting.pop(group.outputs[0], None) if waiting else None
        if carried is None:
            return None
        if step_ranks is not None and set(carried.order) == {int(r) for r in step_ranks}:
            return carried
        self.reduce_partials(carried, True)
        return None

    def carried_to(self, group):
        """The Reduction carried to this group's tile and not taken yet, or None."""
        waiting = self.carried.get(group.op.name)
        return waiting.get(group.outputs[0]) if waiting else None

    def carried_choice(self, group):
        """The PartialChoice of partial steps adding into the partials carried to
        a group that partial_choice leaves to its owners (adds_into_carried), else None."""
        carried = self.carried_to(group)
        if carried is None:
            return None
        owner, n_inputs = self.owner[group.outputs[0]], len(group.op.inputs)
        step_ranks, order, _ = self.partial_plan(group, owner)
        codes, fetches = set(), False
        for step, rank in zip(group.steps, step_ranks):
            for key in step.keys[:n_inputs]:
                code = self.owner[key]
                codes.add(code)
                fetches = fetches or bool(self.outside(rank, code))
        return PartialChoice(step_ranks, order) if self.adds_into_carried(
            carried, owner, step_ranks, fetches, codes) else None

    def adds_into_carried(self, carried, owner, step_ranks, fetches, codes) -> bool:
        """Should a group its mesh-group owners would compute add into the partials
        carried to it? Where its partial steps lie on the carried ranks and fetch
        nothing: the carried reduction is paid either way, and owner computes has
        every member fetch what it lacks (dp x tp's embedding gradient: each rank of a
        dp column fetched the other rows' sequence gradients, where Megatron adds its
        own row's into the logits gemm's partials and all-reduces once). The partials
        then live until this op instead of being reduced as soon as they are summed,
        so a tile owned by one rank, which fetches its inputs once, keeps owner
        computes (fsdp x tp's wte_grad: docs/benchmarks.md). Only where every rank
        that would send an input tile (`codes`: their owner codes) to the owners holds
        a carried partial or owns the tile: planning alone, only those ranks know of
        the carry, so every rank whose program either choice touches decides alike."""
        if carried is None or owner >= 0 or fetches or \
                {int(rank) for rank in step_ranks} != set(carried.order):
            return False
        knowing = self.rank_set(owner) | set(carried.order)
        for code in codes:
            if code == REPLICATED:
                continue
            holders = self.rank_set(code)
            if any(self.sender_of(code, rank) not in knowing
                   for rank in self.rank_set(owner) - holders):
                return False
        return True

    def carry_or_reduce(self, reduction, step_ranks, root_has_value):
        """Carry the partials to the next op accumulating into the tile when they lie
        on its carriers (every rank that holds one visits that op's group), else reduce."""
        op, owner = reduction.op, reduction.owner
        following = self.chains.get(op.name)
        if following is not None and {int(r) for r in step_ranks} <= self.carriers(
                owner, reduction.out_key):
            self.carried.setdefault(following, {})[reduction.out_key] = reduction
            return
        self.reduce_partials(reduction, root_has_value)

    def carriers(self, owner, out_key) -> frozenset:
        """The ranks that may carry a tile's partials: a group's members; for a mesh's
        fsdp shard owned by one rank, its column, so each holder keeps its column's
        share of the tensor only (where every rank held a partial of every tile, as
        the fsdp preset's vocabulary gradient, the carried partials would be the whole
        tensor on each rank); none for another tile of one rank."""
        if owner < 0:
            return self.rank_set(owner)
        if out_key[0] in self.columns:
            return self.rank_set(self.column_of(out_key))
        return frozenset()

    def carries(self, op_name, key, rank) -> bool:
        """Does `rank` hold a partial sum carried to `op_name`'s group writing `key`?"""
        waiting = self.carried.get(op_name)
        reduction = waiting.get(key) if waiting else None
        return reduction is not None and rank in reduction.order

    def carried_keys(self, op_name, rank) -> list:
        """The output keys of `op_name` to which `rank` carries a partial sum."""
        return [key for key, reduction in self.carried.get(op_name, {}).items()
                if rank in reduction.order]

    def reduce_carried(self, op):
        """After `op`'s groups: reduce what was carried to tiles it did not write."""
        for reduction in self.carried.pop(op.name, {}).values():
            self.reduce_partials(reduction._replace(op=op), True)
