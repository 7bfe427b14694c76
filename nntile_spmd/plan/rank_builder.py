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

from .builder import TAG_LIMIT, ProgramBuilder, new_tuple
from .instructions import Exec, Recv, Send


class RankProgramBuilder(ProgramBuilder):
    """ProgramBuilder that keeps every rank's state but builds `rank`'s program only."""

    def __init__(self, rank, nranks, meta, owner_table, permanent_holders):
        super().__init__(nranks, meta, owner_table, permanent_holders)
        self.rank = rank
        self.program = self.programs[rank]
        self.sends = self.inserts[rank]           # program position -> SENDs placed there
        self.ready = self.ready_at[rank]          # key -> position of its current version

    def transfer(self, key, source, target, consumer):
        self.held[target][key] = self.version[key]
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
        if self.rank in ranks:
            program = self.program
            program.append(new_tuple(Exec, (kernel, keys, reads, writes, params, flops,
                                            op_name)))
            position, ready = len(program), self.ready
            for key in writes:
                ready[key] = position

    def finish_rank(self) -> list:
        """This rank's program with its sends placed where their versions appear."""
        program, flat, start = self.program, [], 0
        for position in sorted(self.sends):
            flat.extend(program[start:position])
            flat.extend(self.sends[position])
            start = position
        flat.extend(program[start:])
        return flat


def permanent_holders(plan) -> dict:
    """Tile key -> ranks that keep it across executes (the builders' initial copies)."""
    holders = defaultdict(list)
    for rank, keys in enumerate(plan.permanent):
        for key in keys:
            holders[key].append(rank)
    return holders
