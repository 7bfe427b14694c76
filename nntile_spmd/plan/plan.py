"""Plan layer: build_plan() turns a logical graph into the SPMD plan every rank
derives identically: tilings, owners, and one program per rank (per phase set).
A Plan is a plain value; runtime/ executes it, nothing here talks to other ranks.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import numbers
from functools import cached_property

from ..graph.analysis import dead_ops
from ..graph.logical_graph import PHASES
from ..graph.recompute import recomputed_ops
from .axes import axis_classes
from .accumulate import accumulation_chains
from .builder import PlanError, ProgramBuilder
from .distribution import REPLICATED, group_of
from . import offload
from .fusion import fuse_program
from .instructions import Exec, Recv, Send
from .lowering import lower_op
from .mesh import column_layout
from .pipeline import micro_batch_order
from .views import find_views
from .memory import insert_frees, simulate_memory
from .rank_builder import RankProgramBuilder, permanent_holders
from .rank_tiles import RankTiles
from .tile_tables import TileMetas
from .presets import as_preset
from .plan_options import (DEFAULT_WINDOW, PlanOptions, PlanRequest, check_arguments,
                           pipeline_order)
from .tiling import TilingRequest, TilingSpec, TilingStrategy

HASHED_PARTS = ("graph", "tiling", "distribution")   # fingerprint parts sent as hashes


def build_plan(graph, nranks: int, tiling=None, distribution="single",
               window: int = DEFAULT_WINDOW, deterministic: bool = False,
               rank=None, fuse: bool = False, policy=None) -> Plan:
    """Tile and distribute every tensor of `graph` over `nranks` ranks.

    deterministic: every sum over tiles runs on the output tile's owner in tile index
    order (never as partial sums reduced in a tree over the ranks that hold them), so
    for one tile grid the results are bitwise the same on any rank count and preset.
    With `rank`, the plan is that rank's view (an MPI rank, a PlanningWorld):
    `program(rank)` derives its program alone instead of every rank's.
    fuse: chains of elementwise tasks on one tile become one fused task (plan/fusion.py).
    policy: an offloading ExecutionPolicy (plan/offload.py): EVICT/PREFETCH keep each
    rank's device bytes within its budget; None (or offloading disabled) offloads nothing.
    """
    check_arguments("build_plan", graph=graph, window=window, deterministic=deterministic,
                    fuse=fuse, tiling=tiling)
    options = PlanOptions(window=window, deterministic=bool(deterministic), fuse=bool(fuse),
                          own_rank=rank, policy=offload.as_policy(policy))
    return plan_for(graph, PlanRequest(nranks, tiling, distribution, options))


def plan_for(graph, request: PlanRequest) -> Plan:
    """The plan that `request` asks for (its options checked already, as build_plan and
    compile do)."""
    if graph.symbols():
        raise PlanError(f"graph {graph.name!r} has unbound symbolic dims "
                        f"{sorted(graph.symbols())}; pass shape_bindings or call g.bind()")
    nranks, rank = request.nranks, request.options.own_rank
    if nranks < 1 or request.options.window < 1:
        raise ValueError(f"need nranks >= 1 and window >= 1, got {nranks} and "
                         f"{request.options.window}")
    if rank is not None and not 0 <= rank < nranks:
        raise ValueError(f"rank {rank} is not in a world of {nranks} rank(s)")
    with gc_paused():
        return plan_graph(graph, request)


def plan_graph(graph, request: PlanRequest) -> Plan:
    nranks = request.nranks
    classes, class_of = axis_classes(graph)
    preset = as_preset(request.distribution)
    tiling_request = TilingRequest(tuple(classes), class_of, graph, nranks,
                                   preset.split_classes(graph, class_of, classes),
                                   preset.split_tiles(graph, class_of, classes),
                                   preset.split_ranks(graph, class_of, classes))
    class_tilings, tiling_notes = (request.tiling or TilingStrategy.auto()).resolve_explained(
        tiling_request)
    preset.check_tilings(graph, class_of, classes, class_tilings, nranks)
    tilings = {t.name: TilingSpec(tuple(class_tilings[class_of[(t.name, d)]]
                                        for d in range(t.ndim))) for t in graph.tensors()}
    distributions = preset.assign(graph, class_of, classes, nranks)
    owners = {name: tensor_owners(name, distributions[name], spec.grid, nranks)
              for name, spec in tilings.items()}
    return Plan(graph, nranks, classes=classes, class_of=class_of, tilings=tilings,
                distributions=distributions, owners=owners, groups=preset.rank_groups(nranks),
                options=request.options,
                pipeline=pipeline_order(graph, class_of, classes, preset),
                tiling_notes=tuple(tiling_notes))


def tensor_owners(name, distribution, grid, nranks):
    """The owners array of one tensor; a bad distribution's error names the tensor."""
    try:
        return distribution.owners(grid, nranks)
    except ValueError as error:
        raise ValueError(f"tensor {name!r}: {error}") from None


class Plan:
    """Tilings, owners and per-rank programs of one graph on `nranks` ranks: a value,
    complete once constructed. Later calls only fill the memo caches (`_programs`,
    `_rank_programs`, `_rest_sets` and the cached properties)."""

    def __init__(self, graph, nranks, *, classes, class_of, tilings, distributions,
                 owners, groups, options, pipeline=None, tiling_notes=()):
        self.graph, self.nranks = graph, nranks
        self.groups = groups   # rank sets of a mesh; owner code group_code(g) names groups[g]
        self.classes, self.class_of = classes, class_of
        self.tilings, self.distributions, self.owners = tilings, distributions, owners
        self.meta = TileMetas(tilings, {t.name: t.dtype for t in graph.tensors()})
        self.options = options
        self.window, self.deterministic = options.window, options.deterministic
        self.fuse, self.own_rank, self.policy = options.fuse, options.own_rank, options.policy
        self.pipeline = pipeline   # a PipelineOrder, or None: the program's op order
        self.tiling_notes = tiling_notes   # why each axis is cut so (dump_plan)
        self._programs = {}        # phases -> every rank's program
        self._rank_programs = {}   # (phases, rank) -> one rank's program, derived alone
        self._rest_sets = {}       # rank -> persistent tiles resident at rest (offloading)

    # -- ownership ------------------------------------------------------------------
    def owner_of(self, key) -> int:
        """Owner rank of a tensor tile, REPLICATED (-1), or a mesh group's code."""
        name, coord = key
        return int(self.owners[name][coord])

    def ranks_of_owner(self, owner):
        """The ranks an owner value names: one rank, every rank, or a mesh group."""
        if owner >= 0:
            return (owner,)
        return range(self.nranks) if owner == REPLICATED else self.groups[group_of(owner)]

    def first_holder(self, key) -> int:
        """The owner of a tile held by one rank; REPLICATED for every rank; the
        lowest rank of a mesh group (who writes it to a checkpoint, say)."""
        owner = self.owner_of(key)
        return owner if owner >= REPLICATED else self.groups[group_of(owner)][0]

    @cached_property
    def columns(self) -> dict:
        """{tensor name: owner codes of its tiles' columns} for the fsdp shards of a
        mesh (plan/mesh.py column_layout); other tensors are absent."""
        result = {}
        for name, spec in self.distributions.items():
            widened = column_layout(spec)
            if widened is not None:
                result[name] = tensor_owners(name, widened, self.tilings[name].grid,
                                             self.nranks)
        return result

    @cached_property
    def permanent(self) -> list:
        """Per rank, the set of tile keys kept across executes."""
        result = [set() for _ in range(self.nranks)]
        for tensor in self.graph.tensors():
            if tensor.keeps_storage:
                for coord in self.tilings[tensor.name].coords():
                    owner = int(self.owners[tensor.name][coord])
                    for rank in self.ranks_of_owner(owner):
                        result[rank].add((tensor.name, coord))
        return result

    def persistent_bytes(self, rank: int) -> int:
        """Bytes of the tiles `rank` keeps across executes."""
        return sum(self.meta[key].nbytes for key in self.permanent[rank])

    # -- programs -------------------------------------------------------------------
    def programs(self, phases=None) -> list:
        """One instruction list per rank for the ops of `phases` (default: all)."""
        phase_key = normalize_phases(phases)
        if phase_key not in self._programs:
            with gc_paused():
                self._programs[phase_key] = self._build_programs(phase_key)
        return self._programs[phase_key]

    def _build_programs(self, phase_key, offloaded=True):
        builder = ProgramBuilder(self.nranks, self.meta, self.owners, permanent_holders(self),
                                 self.deterministic, self.groups, self.columns,
                                 self.chains(phase_key))
        for op, groups in self.task_groups(phase_key):
            self.gather_trees(builder, op)
            builder.add_op(groups)
            builder.walked(op)
        return [self.finish_program(program, rank, phase_key, offloaded)
                for rank, program in enumerate(builder.finish())]

    def finish_program(self, program, rank, phase_key=PHASES, offloaded=True):
        """FREEs placed, then elementwise chains fused when the plan fuses, then
        EVICT/PREFETCH placed when the plan offloads (plan/offload.py) and `offloaded`."""
        program = insert_frees(program, self.permanent[rank])
        program = fuse_program(program, self.meta) if self.fuse else program
        if self.policy is None or not offloaded:
            return program
        return offload.rank_program(self, program, rank, phase_key)

    def rank_program(self, rank: int, phases=None) -> list:
        """`rank`'s program derived alone (equal to programs(phases)[rank])."""
        key = (normalize_phases(phases), rank)
        if key not in self._rank_programs:
            with gc_paused():
                self._rank_programs[key] = self._build_rank_program(*key)
        return self._rank_programs[key]

    def _build_rank_program(self, phase_key, rank, offloaded=True):
        """`rank`'s program derived alone; offloaded=False: before EVICT/PREFETCH are
        placed (the program offloading's rest set comes from)."""
        tiles = RankTiles(rank, self.groups, self.owners, self.tilings, self.views)
        builder = RankProgramBuilder(rank, self.nranks, self.meta, self.owners,
                                     permanent_holders(self), self.deterministic, self.groups,
                                     tiles, self.columns, self.chains(phase_key))
        for op, groups in self.task_groups(phase_key, tiles.coords):
            self.gather_trees(builder, op)
            builder.add_op(groups)
            builder.walked(op)
        return self.finish_program(builder.finish_rank(), rank, phase_key, offloaded)

    def chains(self, phase_key) -> dict:
        """Ops whose partial sums carry on to the next op adding into their output
        (plan/accumulate.py); none in a pipeline's walk, which splits ops per
        micro-batch."""
        if self.pipeline is not None or self.deterministic:
            return {}
        viewed = {tensor.name for op in self.graph.ops() if op.spec.view
                  for tensor in op.inputs + op.outputs}
        return accumulation_chains(self.live_ops(phase_key), frozenset(viewed))

    def gather_trees(self, builder, op):
        """Widely read tiles down trees (plan/gather.py); a pipeline's walk splits an
        op per micro-batch, so its tiles keep their point-to-point fetches."""
        if self.pipeline is None:
            builder.gather_widely_read(op, self.views.names)

    def task_groups(self, phase_key, coords_of=None):
        """(op, task groups) as both builders walk them: one list per op in program
        order, or per op and micro-batch in pipeline order (plan/pipeline.py).
        `coords_of(op)` names the output tiles one rank lowers (RankTiles.coords); a
        pipeline lowers every tile, as its order depends on every group."""
        if self.pipeline is not None:
            lowered = ((op, lower_op(op, self.tilings, self.views))
                       for op in self.live_ops(phase_key))
            return micro_batch_order(lowered, *self.pipeline)
        return ((op, lower_op(op, self.tilings, self.views, coords_of and coords_of(op)))
                for op in self.live_ops(phase_key))

    @cached_property
    def views(self):
        """The ops planned as views: their output tiles alias input tiles (plan/views.py)."""
        return find_views(self.graph, self.tilings)

    def live_ops(self, phases=None) -> list:
        """The ops of `phases` that an execute runs: dead ops are left out.

        Dead: no value the op writes reaches, through later ops of the same
        execute, a tensor whose tiles outlive it (input, output, persistent,
        external), so nobody could observe it (graph.analysis.dead_ops).
        """
        phase_key = normalize_phases(phases)
        ops = [op for op in self.graph.ops() if op.phase in phase_key]
        dead = {op.name for op in dead_ops(self.graph, ops, self.kept_ids)}
        return [op for op in ops if op.name not in dead]

    def dead_ops(self, phases=None) -> list:
        """Names of the ops of `phases` left out of the programs as dead."""
        live = {op.name for op in self.live_ops(phases)}
        return [op.name for op in self.graph.ops()
                if op.phase in normalize_phases(phases) and op.name not in live]

    @cached_property
    def kept_ids(self) -> frozenset:
        return frozenset(t.id for t in self.graph.tensors() if t.keeps_storage)

    def programs_of(self, rank, phases=None) -> list:
        """[program of `rank`], or every rank's programs for rank None (one build)."""
        return self.programs(phases) if rank is None else [self.program(rank, phases)]

    def program(self, rank: int, phases=None) -> list:
        """`rank`'s instructions: from the all-ranks programs when this plan builds
        them (no own_rank, or already built), else derived for `rank` alone."""
        self.check_rank(rank)
        if self.own_rank is None or normalize_phases(phases) in self._programs:
            return self.programs(phases)[rank]
        return self.rank_program(rank, phases)

    def check_rank(self, rank) -> None:
        """A rank of this plan's world, or ValueError (a list index would take -1 as
        the last rank and answer IndexError for 5 of 1)."""
        if isinstance(rank, bool) or not isinstance(rank, numbers.Integral) or \
                not 0 <= rank < self.nranks:
            raise ValueError(f"rank {rank!r} is not a rank of this plan's world of "
                             f"{self.nranks} rank(s) (0 to {self.nranks - 1})")

    # -- exact analysis -----------------------------------------------------------------
    def peak_bytes(self, rank: int, phases=None) -> int:
        """Peak bytes held by `rank` during one execute (persistent + transient); under
        offloading, device bytes (persistent tiles offloaded at rest do not count)."""
        self.check_rank(rank)
        resident = offload.resident_at_rest(self, rank)
        return simulate_memory(self.program(rank, phases),
                               sum(self.meta[key].nbytes for key in resident), resident,
                               self.meta, self.window)

    def bytes_sent(self, rank=None, phases=None) -> int:
        """Tile payload bytes sent during one execute by `rank` (None: all ranks)."""
        return sum(i.nbytes for program in self.programs_of(rank, phases) for i in program
                   if type(i) is Send)

    def bytes_received(self, rank=None, phases=None) -> int:
        """Tile payload bytes received during one execute by `rank` (None: all ranks)."""
        return sum(i.nbytes for program in self.programs_of(rank, phases) for i in program
                   if type(i) is Recv)

    def flops(self, rank=None, phases=None) -> int:
        """FLOPs executed during one execute by `rank` (None: all ranks)."""
        return sum(i.flops for program in self.programs_of(rank, phases) for i in program
                   if type(i) is Exec)

    def recompute_flops(self, rank=None, phases=None) -> int:
        """The part of flops() spent recomputing activations in backward (graph.recompute)."""
        copies = recomputed_ops(self.graph)
        return sum(i.flops for program in self.programs_of(rank, phases) for i in program
                   if type(i) is Exec and i.op_name in copies)

    def fingerprint_parts(self) -> dict:
        """What ranks compare at compile: hashes of the graph, the tiling and the owners
        (HASHED_PARTS), and the plan's options as short texts, so that a mismatch names
        the option and both values (one rank alone with deterministic=True)."""
        graph_text = "\n".join(
            [f"T {t.name} {t.shape} {t.dtype} {t.requires_grad} {t.persistent} "
             f"{t.external} {t.is_input} {t.is_output}" for t in self.graph.tensors()]
            + [f"O {op.name} {op.op_type} {[t.name for t in op.inputs]} "
               f"{[t.name for t in op.outputs]} {sorted(op.attrs.items())} {op.phase}"
               for op in self.graph.ops()])
        tiling_text = repr(sorted((name, repr(spec)) for name, spec in self.tilings.items()))
        owner_text = "".join(f"{name}:{self.owners[name].tobytes().hex()}"
                             for name in sorted(self.owners))
        parts = {part: hashlib.sha256(text.encode()).hexdigest()[:16]
                 for part, text in (("graph", graph_text), ("tiling", tiling_text),
                                    ("distribution", owner_text))}
        pipeline = "none" if self.pipeline is None else \
            ("1f1b" if self.pipeline.one_f_one_b is not None else "pipelined")
        parts.update({"world size": str(self.nranks), "window": str(self.window),
                      "deterministic": str(self.deterministic), "fuse": str(self.fuse),
                      "pipeline": pipeline, "offload policy": repr(self.policy)})
        return parts

    def fingerprint(self) -> str:
        """One hash of graph + plan."""
        return hashlib.sha256(repr(sorted(self.fingerprint_parts().items())).encode()
                              ).hexdigest()[:16]


@contextlib.contextmanager
def gc_paused():
    """Pause the cyclic garbage collector while planning: a plan allocates ~10^5-10^6
    acyclic tuples, and the collector's repeated passes over them cost a large share of
    the planning time (docs/benchmarks.md, "Measurements behind code constants")."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def normalize_phases(phases) -> tuple:
    if phases is None:
        return PHASES
    phases = (phases,) if isinstance(phases, str) else tuple(phases)
    unknown = set(phases) - set(PHASES)
    if unknown:
        raise ValueError(f"unknown phase(s) {sorted(unknown)}; expected some of {PHASES}")
    return tuple(p for p in PHASES if p in phases)
