"""Plan layer: derive every rank's program from the task groups in program order.

The builder tracks which version of each tile every rank holds. A task runs on the
owner of its output tile (every rank for replicated tiles); a missing input becomes
a SEND placed right after the instruction that produced that version plus a RECV
before the consuming task. A group with several steps may instead be computed as
partial sums next to its inputs and reduced to the owner in a fixed tree
(broadcast back down for replicated outputs), as plan/partial.py decides.

The ranks of a tile's owner code hold its current version once the group writing
it is done, so the rank that sends a tile is a static fact: the owner, or for a mesh
group the member that sender_of names for the reader (plan/partial.py).
"""

from __future__ import annotations

from collections import defaultdict
from typing import NamedTuple

from .accumulate import CarriedPartials, Reduction
from .distribution import REPLICATED, group_of
from .instructions import Exec, Recv, Send, key_str, new_tuple
from .kernel_params import KernelParams
from .gather import TreeGathers
from .partial import PartialSums
from .tile_tables import OwnerTable, partial_name

TAG_LIMIT = 32000   # MPI guarantees tags up to 32767 only


class BetaParams(NamedTuple):
    """A step's KernelParams (kept, so its id stays its own) and them with beta set."""
    params: object
    with_beta: object


class PlanError(ValueError):
    """The graph cannot be planned as asked (e.g. a tensor read before written)."""


class ProgramBuilder(CarriedPartials, TreeGathers, PartialSums):
    def __init__(self, nranks, meta, owners, permanent_holders, deterministic=False,
                 groups=(), columns=None, chains=None):
        self.nranks = nranks
        self.init_carried(chains)           # plan/accumulate.py
        self.columns = columns or {}        # tensor name -> column codes (Plan.columns)
        self.groups = groups                # mesh rank sets: owner code group_code(g)
        self.deterministic = deterministic   # no partial sums: tile order, not rank order
        self.meta = meta                    # key -> TileMeta
        self.owner = OwnerTable(owners)     # key -> owner code, partial-sum tiles too
        self.owners = owners                # tensor name -> owner codes over its tile grid
        self.programs = [[] for _ in range(nranks)]
        self.inserts = [defaultdict(list) for _ in range(nranks)]
        self.version = {}
        self.held = [dict() for _ in range(nranks)]
        self.ready_at = [dict() for _ in range(nranks)]   # key -> program position
        self.pair_count = defaultdict(int)
        self.beta_params = {}
        self.temp_names = {}
        self.add_params = {}
        self.rank_sets, self.sharing_memo, self.op_labels = {}, {}, {}
        self.shard_memo = {}                # (column code, output owner) -> ranks
        self.outside_memo, self.best_memo = {}, {}   # PartialSums' memos by owner codes
        self.meets_memo = {}                # TreeGathers.meets_every by owner codes
        self.tensor_codes = {}              # tensor name -> its tiles' owner codes
        self.tree_copies = {}   # key -> gather.TreeCopies
        self.tensor_writes = {}             # tensor name -> ops of the walk writing it
        for key, holders in permanent_holders.items():
            self.version[key] = 0
            for rank in holders:
                self.held[rank][key] = 0
                self.ready_at[rank][key] = 0

    # -- primitives ------------------------------------------------------------
    def owner_of(self, key):
        return self.owner[key]

    def ranks_of_owner(self, owner):
        if owner >= 0:
            return (owner,)
        return range(self.nranks) if owner == REPLICATED else self.groups[group_of(owner)]

    def ranks_of(self, key):
        return self.ranks_of_owner(self.owner[key])

    def is_current(self, rank, key):
        return self.held[rank].get(key, -1) == self.version.get(key)

    def source_of(self, key, op_name, target):
        """The rank of the tile's owner code that sends it to `target` (sender_of: it
        holds the current version)."""
        self.check_written(key, op_name)
        source = self.sender_of(self.owner[key], target)
        assert self.is_current(source, key), f"rank {source} lacks the current {key_str(key)}"
        return source

    def check_written(self, key, op_name):
        if self.version.get(key) is None:
            raise PlanError(f"{op_name}: reads {key_str(key)} before anything writes it "
                            f"(bind it as an input, make it persistent, or write it first)")

    def transfer(self, key, source, target, consumer):
        pair = (source, target)
        count = self.pair_count[pair]
        self.pair_count[pair] = count + 1
        tag = count % TAG_LIMIT
        nbytes = self.meta[key].nbytes
        self.inserts[source][self.ready_at[source][key]].append(
            new_tuple(Send, (key, target, tag, nbytes, consumer)))
        program = self.programs[target]
        program.append(new_tuple(Recv, (key, source, tag, nbytes, consumer)))
        self.held[target][key] = self.version[key]
        self.ready_at[target][key] = len(program)

    def run_task(self, ranks, kernel, keys, reads, writes, params, flops, op_name):
        """Fetch what each rank lacks, then run the kernel there; writes bump versions."""
        held, version, programs, ready_at = self.held, self.version, self.programs, self.ready_at
        for rank in ranks:
            for key in reads:
                if not self.is_current(rank, key):
                    self.transfer(key, self.source_of(key, op_name, rank), rank, op_name)
        new_versions = [(key, version.get(key, -1) + 1) for key in writes]
        version.update(new_versions)
        instruction = new_tuple(Exec, (kernel, keys, reads, writes, params, flops, op_name))
        for rank in ranks:
            program = programs[rank]
            program.append(instruction)
            held[rank].update(new_versions)
            position = len(program)
            ready_here = ready_at[rank]
            for key in writes:
                ready_here[key] = position

    # -- lowering of one op ------------------------------------------------------
    def add_op(self, groups):
        """Lower all task groups of one op (owner computes, or partial sums per group)."""
        for group in groups:
            self.add_group(group)

    def walked(self, op):
        """After `op`'s groups: partials carried to it but not taken are reduced, and
        tree copies of its outputs go stale."""
        self.reduce_carried(op)
        self.note_writes(op)

    def add_group(self, group):
        self.check_outputs(group)
        out_key = group.outputs[0]
        owner = self.owner_of(out_key)
        choice = self.partial_choice(group) or self.carried_choice(group)
        carried = self.take_carried(group, None if choice is None else choice.step_ranks)
        if choice is not None:
            return self.run_partial(group, owner, choice.step_ranks, choice.order,
                                    carried=carried)
        for index, step in enumerate(group.steps):
            self.run_step(list(self.ranks_of(out_key)), group, step, index, step.keys)

    def check_outputs(self, group):
        out_key = group.outputs[0]
        owner = self.owner_of(out_key)
        for other in group.outputs[1:]:
            if self.owner_of(other) != owner:
                raise PlanError(f"{group.op.name}: outputs {key_str(out_key)} and "
                                f"{key_str(other)} must have the same owner (distribute "
                                f"them alike)")

    def run_step(self, ranks, group, step, index, keys, zero_beta=False):
        """Step `index` of the steps one rank runs into one output tile."""
        op = group.op
        spec = op.spec
        n_inputs = len(op.inputs)
        outputs = keys[n_inputs:]
        params, reads_output = step.params, group.reads_output_first
        beta_attr = spec.beta_attr
        if beta_attr is not None:
            beta = 0.0 if zero_beta else op.attrs[beta_attr] if index == 0 else 1.0
            params, reads_output = self.with_beta(params, beta_attr, beta), beta != 0
        reads = tuple(dict.fromkeys(keys[:n_inputs] + (outputs if reads_output else ())))
        self.run_task(ranks, spec.kernel, keys, reads, outputs, params, step.flops, op.name)

    def with_beta(self, params, beta_attr, beta):
        """params with beta set; PERF: one shared KernelParams per (params, beta)."""
        cached = self.beta_params.get((id(params), beta))
        if cached is None or cached.params is not params:
            cached = self.beta_params[(id(params), beta)] = BetaParams(
                params, params.with_values(**{beta_attr: beta}))
        return cached.with_beta

    def run_partial(self, group, owner, step_ranks, order, carried=None):
        """Steps on `step_ranks`, then a binomial tree up `order` to its first rank
        (`carried`: adding to the partials of an earlier op, on its tree)."""
        op, out_key = group.op, group.outputs[0]
        keys_op, order = (op, order) if carried is None else (carried.keys_op, carried.order)
        n_inputs, root = len(op.inputs), order[0]
        counts = defaultdict(int)   # steps each rank ran so far: its beta
        if carried is not None:
            counts.update(dict.fromkeys(order, 1))
        for step, rank in zip(group.steps, step_ranks):
            keys = step.keys if rank == root else \
                step.keys[:n_inputs] + (self.temp_key(keys_op, out_key, rank),)
            if self.follows_step(rank, keys):
                self.run_step([rank], group, step, counts[rank], keys,
                              zero_beta=rank != root and counts[rank] == 0)
            counts[rank] += 1
        self.carry_or_reduce(Reduction(op, keys_op, out_key, owner, tuple(order),
                                       group.reads_output_first),
                             step_ranks, counts[root] > 0)

    def reduce_partials(self, reduction, root_has_value):
        """The binomial tree up the reduction's order, merging each child's partial sum
        into its parent's, then the broadcast to a group or replicated owner."""
        op, keys_op, out_key, owner, order, reads_output_first = reduction
        root = order[0]
        stride = 1
        while stride < len(order):
            for index in range(0, len(order) - stride, 2 * stride):
                parent, child = order[index], order[index + stride]
                beta = 1.0
                if parent == root and not root_has_value:
                    beta, root_has_value = op.attrs.get(op.spec.beta_attr, 0.0), True
                    beta = beta if reads_output_first else 0.0
                if self.follows_pair(parent, child):
                    parent_key = out_key if parent == root else \
                        self.temp_key(keys_op, out_key, parent)
                    self.combine(parent, self.temp_key(keys_op, out_key, child), parent_key,
                                 beta, op)
            stride *= 2
        if owner < 0:
            self.broadcast_to_group(out_key, root, op.name)

    def follows_step(self, rank, keys) -> bool:
        """Does this builder plan a partial step on `rank`, given the step's kernel keys
        (inputs, then the output or `rank`'s partial sum)? (Every one here.)"""
        return True

    def follows_pair(self, source, target) -> bool:
        """Does this builder plan what `source` and `target` exchange? (Every pair here.)"""
        return True

    def combine(self, rank, child_key, parent_key, beta, op):
        """parent = merge(child, parent) on `rank` with the op's combine kernel (add, or
        e.g. logaddexp for logsumexp's partial results); beta == 0: parent = child."""
        reads = (child_key, parent_key) if beta != 0 else (child_key,)
        flops = 3 * self.meta[parent_key].size
        params = self.add_params.get(beta)   # PERF: shared, never mutated
        if params is None:
            params = self.add_params[beta] = KernelParams(alpha=1.0, beta=beta)
        self.run_task((rank,), op.spec.combine, (child_key, parent_key, parent_key), reads,
                      (parent_key,), params, flops, op.name)

    def broadcast(self, key, root, op_name, targets, ordered=False):
        """Binomial tree from `root` to the `targets` (every rank, or a mesh group);
        `ordered`: the targets are in tree order already (a gather tree's)."""
        order = [root] + [rank for rank in targets if rank != root] if ordered else \
            self.hop_order(key, root, op_name, targets)
        stride = 1
        while stride < len(order):
            for index in range(stride):
                if index + stride < len(order) and \
                        self.follows_pair(order[index], order[index + stride]):
                    self.transfer(key, order[index], order[index + stride], op_name)
            stride *= 2

    def temp_key(self, op, out_key, rank):
        name, coord = out_key
        names = self.temp_names   # PERF: format each partial-sum tensor name once
        temp_name = names.get((name, op.name, rank))
        if temp_name is None:
            temp_name = names[(name, op.name, rank)] = partial_name(name, op.name, rank)
        key = (temp_name, coord)
        self.owner[key] = rank   # the plan's meta sizes it like out_key (TileMetas)
        return key

    # -- results -------------------------------------------------------------------
    def finish(self):
        """Each rank's program with the sends placed where their versions appear."""
        programs = []
        for rank, program in enumerate(self.programs):
            inserts = self.inserts[rank]
            flat, start = [], 0
            for position in sorted(inserts):   # PERF: copy the runs between sends by slices
                flat.extend(program[start:position])
                flat.extend(inserts[position])
                start = position
            flat.extend(program[start:])
            programs.append(flat)
        return programs
