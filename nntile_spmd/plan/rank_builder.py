"""Plan layer: derive ONE rank's program (DESIGN.md section 4.3, per-rank planning).

Every placement and transfer decision is taken exactly as ProgramBuilder takes it:
the same walk over the task groups, the same versions and held copies of every
rank, so partial-sum choices, message order and tags agree with the all-ranks
plan by construction (tests/plan/test_plan_rank.py checks that they do). What
is saved is building the instructions: only this rank's EXEC/SEND/RECV tuples
are made, sends are placed and FREEs inserted in one program instead of all.
"""

from __future__ import annotations

from collections import defaultdict

from .builder import TAG_LIMIT, ProgramBuilder
from .instructions import Exec, Recv, Send, new_tuple


class RankProgramBuilder(ProgramBuilder):
    """ProgramBuilder that keeps every rank's state but builds `rank`'s program only."""

    def __init__(self, rank, nranks, meta, owner_table, permanent_holders, deterministic=False,
                 groups=()):
        super().__init__(nranks, meta, owner_table, permanent_holders, deterministic, groups)
        # key -> ranks holding its current version: the same facts as `held`, indexed
        # by tile, so partial_choices can count fetches per tile (see there)
        self.holders = {key: set(ranks) for key, ranks in permanent_holders.items()}
        self.rank = rank
        self.program = self.programs[rank]
        self.sends = self.inserts[rank]           # program position -> SENDs placed there
        self.ready = self.ready_at[rank]          # key -> position of its current version

    def transfer(self, key, source, target, consumer):
        self.held[target][key] = self.version[key]
        self.holders[key].add(target)
        rank = self.rank
        if source != rank and target != rank:
            return   # neither side is us: only the copy's existence matters (held above)
        pair = (source, target)
        count = self.pair_count[pair]
        self.pair_count[pair] = count + 1
        tag = count % TAG_LIMIT
        nbytes = self.meta[key].nbytes
        if source == rank:
            self.sends[self.ready[key]].append(
                new_tuple(Send, (key, target, tag, nbytes, consumer)))
        else:
            self.program.append(new_tuple(Recv, (key, source, tag, nbytes, consumer)))
            self.ready[key] = len(self.program)

    def run_task(self, ranks, kernel, keys, reads, writes, params, flops, op_name):
        """As ProgramBuilder.run_task; the EXEC is built only if `rank` runs it."""
        held, version = self.held, self.version
        for rank in ranks:
            held_here = held[rank]
            for key in reads:
                if held_here.get(key, -1) != version.get(key):
                    self.transfer(key, self.source_of(key, op_name), rank, op_name)
        new_versions = [(key, version.get(key, -1) + 1) for key in writes]
        version.update(new_versions)
        for rank in ranks:
            held[rank].update(new_versions)
        holders = self.holders
        for key in writes:
            holders[key] = set(ranks)
        if self.rank in ranks:
            program = self.program
            program.append(new_tuple(Exec, (kernel, keys, reads, writes, params, flops,
                                            op_name)))
            position, ready = len(program), self.ready
            for key in writes:
                ready[key] = position

    def partial_choices(self, groups):
        """ProgramBuilder.partial_choices, with the (rank, tile) fetch sets kept as
        {tile: ranks} and set differences per tile. PERF: an output every rank holds
        (the loss) over batch tiles on every rank made ranks x tiles Python pairs,
        quadratic in the world size; the decisions are the same (oracle tests)."""
        if self.deterministic or all(len(group.steps) < 2 for group in groups) or \
                groups[0].op.spec.combine is None:   # copy_intersection: steps overwrite
            return [None] * len(groups)   # owner sums in tile order / nothing to choose
        fetched, owner_fetch, greedy_cost, choices = {}, {}, 0, []
        for group in groups:
            choices.append(None)
            out_key = group.outputs[0]
            owner = self.owner_of(out_key)
            exec_ranks = list(self.ranks_of(out_key))
            n_inputs = len(group.op.inputs)
            inputs = {key for step in group.steps for key in step.keys[:n_inputs]}
            missing = self.lacking(set(exec_ranks), inputs)
            merge_into(owner_fetch, missing)
            owner_new = without(missing, fetched)
            owner_cost = self.pair_bytes(owner_new)
            if len(group.steps) > 1 and owner_cost > 0:
                step_ranks, order, messages = self.partial_plan(group, owner, exec_ranks)
                wanted = {}
                for step, rank in zip(group.steps, step_ranks):
                    for key in step.keys[:n_inputs]:
                        wanted.setdefault(key, set()).add(rank)
                partial_new = without({key: ranks - self.holders_of(key)
                                       for key, ranks in wanted.items()}, fetched)
                partial_cost = (self.pair_bytes(partial_new)
                                + messages * self.meta[out_key].nbytes)
                if partial_cost < owner_cost:
                    choices[-1] = (step_ranks, order)
                    owner_new, owner_cost = partial_new, partial_cost
            merge_into(fetched, owner_new)
            greedy_cost += owner_cost
        if greedy_cost <= self.pair_bytes(owner_fetch):   # a tie keeps the greedy choice
            return choices
        return [None] * len(groups)

    def holders_of(self, key):
        return self.holders.get(key, EMPTY) if self.version.get(key) is not None else EMPTY

    def lacking(self, ranks, keys) -> dict:
        """{tile: those of `ranks` without its current version} (non-empty only)."""
        result = {}
        for key in keys:
            missing = ranks - self.holders_of(key)
            if missing:
                result[key] = missing
        return result

    def pair_bytes(self, pairs) -> int:
        meta = self.meta
        return sum(meta[key].nbytes * len(ranks) for key, ranks in pairs.items())

    def finish_rank(self) -> list:
        """This rank's program with its sends placed where their versions appear."""
        program, flat, start = self.program, [], 0
        for position in sorted(self.sends):
            flat.extend(program[start:position])
            flat.extend(self.sends[position])
            start = position
        flat.extend(program[start:])
        return flat


EMPTY = frozenset()


def merge_into(target: dict, pairs: dict) -> None:
    """target |= pairs, both {tile: set of ranks}."""
    for key, ranks in pairs.items():
        if key in target:
            target[key] |= ranks
        else:
            target[key] = set(ranks)


def without(pairs: dict, removed: dict) -> dict:
    """pairs - removed, both {tile: set of ranks}; tiles left with no rank dropped."""
    result = {}
    for key, ranks in pairs.items():
        rest = ranks - removed[key] if key in removed else ranks
        if rest:
            result[key] = rest
    return result


def permanent_holders(plan) -> dict:
    """Tile key -> ranks that keep it across executes (the builders' initial copies)."""
    holders = defaultdict(list)
    for rank, keys in enumerate(plan.permanent):
        for key in keys:
            holders[key].append(rank)
    return holders
