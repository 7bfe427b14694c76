"""Plan layer: derive ONE rank's program (per-rank planning: docs/design.md).

The walk is ProgramBuilder's, restricted to the task groups this rank takes part in:
it owns the output tile (runs it, or roots or joins its reduction tree), owns an
input tile (sends it, or runs a partial step next to it: plan/partial.py puts steps
only on owners of their inputs or on the output's owner), or holds a fetched copy
of a tile the group writes (the copy goes stale). Every decision those groups take
reads only static facts (owners, tile sizes) and the copies that this rank sent or
received, which it sees all of:

- a tile goes to a reader from one rank of its owner code, sender_of's (or along a
  broadcast among its owners, or down a gather tree of plan/gather.py, whose members
  all its owners note: note_gathered), so who holds a copy of a tile this rank would
  send is known here;
- a copy this rank fetched goes stale only by a write of that tile, and a group
  writing it is one this rank visits (a partial sum it merges was written by its
  child in steps not walked here: the merge marks the copy stale).

Tags count the messages of one (source, target) pair in walk order; both ranks of
a pair visit every group that moves a tile between them, so the counts agree with
the all-ranks plan (tests/plan/test_plan_rank.py checks it instruction for
instruction). Steps, tree merges and broadcast hops between two other ranks are
skipped; long groups (a weight gradient summed over 1,024 batch tiles) come as
StepTables and are decided with numpy and walked at this rank's steps only
(plan/rank_partial.py); an op's short groups are decided once per class of alike
groups, and left out where this rank's part is only versions (plan/rank_groups.py).
"""

from __future__ import annotations

from collections import defaultdict

from .builder import TAG_LIMIT, ProgramBuilder
from .distribution import REPLICATED, group_code
from .instructions import Exec, Recv, Send
from .rank_groups import ShortGroups
from .rank_partial import TableSteps
from .step_table import StepTable


class RankProgramBuilder(ShortGroups, TableSteps, ProgramBuilder):
    """ProgramBuilder that visits the groups `rank` takes part in and builds its program."""

    def __init__(self, rank, nranks, meta, owners, permanent_holders, deterministic=False,
                 groups=(), tiles=None, columns=None, chains=None):
        super().__init__(nranks, meta, owners, permanent_holders, deterministic, groups,
                         columns, chains)
        self.tiles = tiles                        # RankTiles: notes this rank's copies
        if tiles is not None:
            tiles.walk = self
        self.sent_to = defaultdict(set)           # key this rank sends -> ranks sent to
        self.rank = rank
        self.program = self.programs[rank]
        self.mine = self.held[rank]               # key -> version of this rank's copy
        self.sends = self.inserts[rank]           # program position -> SENDs placed there
        self.ready = self.ready_at[rank]          # key -> position of its current version
        self.written = set()                      # tensors some op of the walk wrote
        self.size_arrays = {}                     # tensor name -> tile sizes per dim
        self.id_memo = {}                         # (op, input position) -> summed_part
        self.signature_memo = {}                  # a step's signature -> its best rank
        self.wide_memo = {}                       # (op, input position) -> widely_read
        # the owner codes naming this rank (PERF: one set lookup for rank_set(code))
        self.my_codes = frozenset([rank, REPLICATED] + [group_code(index) for index, members
                                                        in enumerate(groups) if rank in members])

    def add_op(self, groups):
        short = []
        for group in groups:
            if isinstance(group.steps, StepTable):
                arrays = self.step_arrays(group)
                if self.table_takes_part(group, arrays):
                    self.add_table_group(group, arrays)
            else:
                short.append(group)
        if short:   # an op's groups are all StepTables or all short
            self.add_short_groups(short)

    def takes_part(self, group) -> bool:
        """Does this rank run, send, reduce or hold a copy of anything in `group`?"""
        owner, codes = self.owner, self.my_codes
        if owner[group.outputs[0]] in codes:
            return True
        mine = self.mine
        if any(key in mine for key in group.outputs) or \
                self.carries(group.op.name, group.outputs[0], self.rank):
            return True
        n_inputs = len(group.op.inputs)
        for step in group.steps:
            for key in step.keys[:n_inputs]:
                code = owner[key]
                if code in codes and code != REPLICATED:
                    return True
        return False

    def current_copies(self, key) -> list:
        """Ranks outside its owners holding the current version of a tile this rank sends."""
        return [rank for rank in self.sent_to.get(key, ()) if self.is_current(rank, key)]

    def check_written(self, key, op_name):
        """A tile's owners saw every write of it; any rank sees that no op so far
        writes its graph tensor at all (the usual mistake), so all ranks raise for that."""
        name = key[0]
        if self.rank in self.rank_set(self.owner[key]) or \
                (name not in self.written and name in self.owners):
            super().check_written(key, op_name)

    def walked(self, op):
        """Note that `op` is behind the walk (its outputs now have writers)."""
        self.written.update(tensor.name for tensor in op.outputs)
        super().walked(op)

    def source_of(self, key, op_name, target):
        self.check_written(key, op_name)
        return self.sender_of(self.owner[key], target)

    def follows_step(self, rank, keys) -> bool:
        """A partial step concerns this rank if it runs it or may send one of its keys:
        an input, or the output that a tree's root outside the output's owners reads."""
        if rank == self.rank:
            return True
        owner, mine = self.owner, self.my_codes
        for key in keys:
            if owner[key] in mine:
                return True
        return False

    def follows_pair(self, source, target) -> bool:
        return self.rank in (source, target)

    def transfer(self, key, source, target, consumer):
        rank = self.rank
        if source != rank and target != rank:
            return   # between two other ranks: nothing here depends on it
        self.held[target][key] = self.version.get(key)
        pair = (source, target)
        count = self.pair_count[pair]
        self.pair_count[pair] = count + 1
        tag = count % TAG_LIMIT
        nbytes = self.meta[key].nbytes
        if source == rank:
            self.sent_to[key].add(target)
            self.sends[self.ready[key]].append(Send(key, target, tag, nbytes, consumer))
        else:
            self.program.append(Recv(key, source, tag, nbytes, consumer))
            self.ready[key] = len(self.program)
            if self.tiles is not None:
                self.tiles.note_copy(key)

    def run_task(self, ranks, kernel, keys, reads, writes, params, flops, op_name):
        """As ProgramBuilder.run_task, for this rank's part: what it fetches and runs,
        and what it sends to the other runners. Those hold a tile they own (its owners
        hold its current version), else a copy only if this rank sent it since it was
        last written; copies of the tiles this rank sends are all noted here."""
        me, version, owner, rank_set = self.rank, self.version, self.owner, self.rank_set
        runs_here = me in ranks
        held_here = [key for key in reads
                     if owner[key] != REPLICATED and me in rank_set(owner[key])]
        if held_here or runs_here:
            for rank in ranks:
                if rank == me:
                    for key in reads:
                        if not self.is_current(me, key):
                            self.transfer(key, self.source_of(key, op_name, me), me, op_name)
                    continue
                for key in held_here:
                    code = owner[key]
                    if rank not in rank_set(code) and self.sender_of(code, rank) == me and \
                            not self.is_current(rank, key):
                        self.transfer(key, me, rank, op_name)
        new_versions = [(key, version.get(key, -1) + 1) for key in writes]
        version.update(new_versions)
        for key, new_version in new_versions:
            if not runs_here and me in rank_set(owner[key]):
                # a partial sum's root outside the owner group: it holds what it wrote
                for rank in ranks:
                    self.held[rank][key] = new_version
        if runs_here:
            self.mine.update(new_versions)
            program = self.program
            program.append(Exec(kernel, keys, reads, writes, params, flops, op_name))
            position, ready = len(program), self.ready
            for key in writes:
                ready[key] = position

    def note_gathered(self, key, owner, members):
        """The owners know every copy the tree handed out, as they know their own sends
        (any of them may send the tile later: sender_of)."""
        if self.rank in self.rank_set(self.owner[key]):
            version = self.version.get(key)
            for rank in members:
                self.held[rank][key] = version
            self.sent_to[key].update(members)

    def combine(self, rank, child_key, parent_key, beta, op):
        if rank == self.rank and self.owner[child_key] != rank:
            # the child wrote this partial sum in steps not walked here; a copy of the
            # same key fetched for an earlier group (a sum split per micro-batch) is stale
            self.version[child_key] = self.version.get(child_key, -1) + 1
        super().combine(rank, child_key, parent_key, beta, op)

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
