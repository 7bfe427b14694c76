"""Runtime layer: CompiledGraph, the user's handle on a plan running on a world
(real MPI ranks or a SimulatedWorld): bind data, execute, read outputs and stats.
"""

from __future__ import annotations

import time

from ..plan.plan import build_plan, normalize_phases
from .binding import BindingMixin
from .device import check_storage, select_device
from .executor import RankExecutor
from .failure import install_abort_on_error
from .planning import PlanningWorld
from .scalars import ResolvedProgram, ScalarTable
from .simulated import SimulatedWorld
from .stats import ExecutionStats, build_stats, compare_with_plan, mismatches
from .staging import wrap_transport
from .storage import TileStore


def make_world(comm, recv_timeout):
    """The world `comm` names: a SimulatedWorld or PlanningWorld as is, else MPI ranks."""
    if isinstance(comm, (SimulatedWorld, PlanningWorld)):
        return comm
    from .mpi_world import MPIWorld   # only real MPI runs need mpi4py loaded
    world = MPIWorld(comm, recv_timeout)
    install_abort_on_error(world.rank, world.size)
    return world


class CompiledGraph(BindingMixin):
    """A graph planned for a world; every rank calls the collective methods in order."""

    def __init__(self, graph, world, plan, device):
        self.graph, self.world, self.plan, self.device = graph, world, plan, device
        # a PlanningWorld holds no tiles: its rank's shard may not fit this machine
        holding = () if isinstance(world, PlanningWorld) else world.local_ranks()
        self.stores = {rank: TileStore(device.xp, device.storage_dtype) for rank in holding}
        self.bound = {}   # tensor name -> local ranks whose tiles were bound
        self.stats = {}      # rank -> ExecutionStats of its last execute
        self.ops_by_name = {op.name: op for op in graph.ops()}
        self.scalars = ScalarTable(graph)
        self.resolved = {}   # (phases, rank) -> ResolvedProgram
        for rank, store in self.stores.items():
            for key in sorted(plan.permanent[rank]):
                store.allocate(key, plan.meta[key], zero=True)

    @classmethod
    def compile(cls, graph, comm=None, tiling=None, distribution="single",
                shape_bindings=None, device="auto", window=8, recv_timeout=300.0,
                threads=None) -> CompiledGraph:
        """Plan `graph` on the ranks of `comm` (MPI.COMM_WORLD by default)."""
        if shape_bindings:
            graph = graph.bind(shape_bindings)
        world = make_world(comm, recv_timeout)
        simulated = isinstance(world, SimulatedWorld)
        # a real rank (or a PlanningWorld's) derives its own program only (DESIGN 4.3)
        plan = build_plan(graph, world.size, tiling, distribution, window,
                          rank=None if simulated else world.rank)
        check_same_plan(world, plan)
        # FIX (runtime stage 3 tests): derive the programs now, so a graph that
        # cannot be planned (a tensor read before anything writes it) raises
        # PlanError from compile() on every rank, not from the first execute().
        if simulated:
            plan.programs()
        else:
            plan.program(world.rank)
        # Select the device first: it imports the kernel backend and so loads its
        # BLAS (scipy's OpenBLAS), which threadpoolctl can only limit once loaded.
        # The other order left the gemm kernels' BLAS at all cores on every rank.
        # GPUs are numbered per node, so the GPU follows the node-local rank: with
        # the global rank, 2 nodes x 4 ranks x 4 GPUs put node 1's ranks 4..7 on
        # GPUs 0..3 only by luck of the modulo (and 3 ranks per node on 2 GPUs not at all).
        if isinstance(world, (SimulatedWorld, PlanningWorld)):
            selected = select_device(device, 0)
        else:
            from . import threads as node_threads
            selected = select_device(device, node_threads.local_rank(world.comm))
            node_threads.configure_blas_threads(world.comm, threads)
        check_storage(graph, selected)
        return cls(graph, world, plan, selected)

    # -- execution -------------------------------------------------------------------
    def execute(self, phases=None):
        """Run one step of the ops in `phases` (default all) on every rank."""
        if isinstance(self.world, PlanningWorld):
            self.world.refuse("execute")
        self.check_inputs_bound()
        executors = {}
        for rank, store in self.stores.items():
            transport = wrap_transport(self.world.transport(rank), self.device,
                                       isinstance(self.world, SimulatedWorld))
            program = self.resolved_program(phases, rank)
            executors[rank] = RankExecutor(rank, program, self.plan.meta, store,
                                           transport, self.device.kernels, self.plan.window)
        try:
            self.world.run(executors)
        except BaseException:
            # FIX (runtime stage 3 tests): leave the stores as a fresh execute expects
            for rank, store in self.stores.items():
                store.drop_transient(self.plan.permanent[rank], self.plan.meta)
            raise
        start = time.perf_counter()
        self.device.synchronize()    # queued GPU kernels belong to this execute's time
        sync_s = time.perf_counter() - start
        ran = normalize_phases(phases)
        for rank, executor in executors.items():
            staging = getattr(executor.transport, "staging", None)
            self.stats[rank] = build_stats(rank, ran, self.ops_by_name, executor,
                                           self.stores[rank], staging,
                                           executor.busy_s + sync_s)

    def resolved_program(self, phases, rank):
        """`rank`'s program with the runtime scalars' current values filled in."""
        key = (normalize_phases(phases), rank)
        resolved = self.resolved.get(key)
        if resolved is None:
            resolved = self.resolved[key] = ResolvedProgram(self.plan.program(rank, phases))
        return resolved.current(self.scalars)

    # -- runtime scalars -----------------------------------------------------------------
    def set_scalar(self, name: str, value) -> None:
        """Set runtime scalar `name` (e.g. "lr") for the following executes; no recompile.

        Like every input, all ranks must set the same value.
        """
        self.scalars.set(name, value)

    def get_scalar(self, name: str) -> float:
        """The current value of runtime scalar `name`."""
        return self.scalars.get(name)

    def scalar_names(self) -> list:
        """Names of the graph's runtime scalars (see train.add_optimizer)."""
        return sorted(self.scalars.values)

    def wait(self):
        """execute() returns when this rank's program is done; kept for API symmetry."""
        self.device.synchronize()

    def get_stats(self, rank=None) -> ExecutionStats:
        """What this rank (or a simulated `rank`) measured in the last execute()."""
        rank = self.world.rank if rank is None else rank
        if rank not in self.stats:
            raise RuntimeError(f"get_stats: rank {rank} has not run an execute() yet")
        return self.stats[rank]

    def stats_vs_plan(self, rank=None) -> dict:
        """{field: (planned, measured)} of the last execute for bytes sent and
        received, FLOPs and peak bytes; the two agree unless something is wrong."""
        return compare_with_plan(self, self.get_stats(rank))

    def check_stats(self, rank=None) -> None:
        """Raise RuntimeError naming every field where measurement and plan differ."""
        stats = self.get_stats(rank)
        problems = mismatches(compare_with_plan(self, stats), stats.rank)
        if problems:
            raise RuntimeError("measured statistics differ from the plan: "
                               + "; ".join(problems))

    # -- plan analysis -----------------------------------------------------------------
    def memory_on_rank(self, rank: int, phases=None) -> int:
        """Planned peak bytes on `rank` during one execute."""
        return self.plan.peak_bytes(rank, phases)

    def estimate_communication(self, rank=None, phases=None) -> int:
        """Planned tile payload bytes sent in one execute (all ranks, or one)."""
        return self.plan.bytes_sent(rank, phases)

    def estimate_received(self, rank=None, phases=None) -> int:
        """Planned tile payload bytes received in one execute (all ranks, or one)."""
        return self.plan.bytes_received(rank, phases)

    def estimate_flops(self, rank=None, phases=None) -> int:
        return self.plan.flops(rank, phases)

    def program(self, rank: int, phases=None) -> str:
        """The instruction listing of `rank`'s program."""
        return "\n".join(str(i) for i in self.plan.program(rank, phases))

    def dump_plan(self, phases=None) -> str:
        from ..plan.report import dump_plan
        # a PlanningWorld lists its own rank: listing all would plan every rank
        ranks = (self.world.rank,) if isinstance(self.world, PlanningWorld) else None
        return dump_plan(self.plan, phases, ranks)

    def fingerprint(self) -> str:
        return self.plan.fingerprint()


def check_same_plan(world, plan):
    """Raise on every rank (never hang) if ranks derived different plans."""
    parts = world.agree(plan.fingerprint_parts())
    differing = [(rank, part) for rank, theirs in enumerate(parts)
                 for part in theirs if theirs[part] != parts[0][part]]
    if differing:
        summary = world.agree([t.describe() for t in plan.graph.tensors()])
        details = "; ".join(f"rank {rank} differs from rank 0 in its {part}"
                            for rank, part in differing)
        diff = first_difference(summary)
        raise RuntimeError(f"ranks built different plans: {details}{diff}")


def first_difference(summaries):
    for rank, tensors in enumerate(summaries[1:], start=1):
        for mine, theirs in zip(summaries[0], tensors):
            if mine != theirs:
                return f" (first tensor difference: rank 0 has {mine}, rank {rank} has {theirs})"
        if len(tensors) != len(summaries[0]):
            return (f" (rank 0 has {len(summaries[0])} tensors, rank {rank} has "
                    f"{len(tensors)})")
    return ""


compile = CompiledGraph.compile  # noqa: A001 - the public name nt.compile
