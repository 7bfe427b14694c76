"""Runtime layer: CompiledGraph, the user's handle on a plan running on a world
(real MPI ranks or a SimulatedWorld): bind data, execute, read outputs and stats.
"""

from __future__ import annotations

import time

from ..plan.plan import build_plan
from .binding import BindingMixin
from .device import select_device
from .executor import RankExecutor
from .failure import install_abort_on_error
from .simulated import SimulatedWorld
from .staging import wrap_transport
from .storage import TileStore


def make_world(comm, recv_timeout):
    if isinstance(comm, SimulatedWorld):
        return comm
    from .mpi_world import MPIWorld   # only real MPI runs need mpi4py loaded
    world = MPIWorld(comm, recv_timeout)
    install_abort_on_error(world.rank, world.size)
    return world


class CompiledGraph(BindingMixin):
    """A graph planned for a world; every rank calls the collective methods in order."""

    def __init__(self, graph, world, plan, device):
        self.graph, self.world, self.plan, self.device = graph, world, plan, device
        self.stores = {rank: TileStore(device.xp, device.storage_dtype)
                       for rank in world.local_ranks()}
        self.bound = {}   # tensor name -> local ranks whose tiles were bound
        self.stats = {rank: {} for rank in world.local_ranks()}
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
        plan = build_plan(graph, world.size, tiling, distribution, window)
        check_same_plan(world, plan)
        # FIX (runtime stage 3 tests): derive the programs now, so a graph that
        # cannot be planned (a tensor read before anything writes it) raises
        # PlanError from compile() on every rank, not from the first execute().
        plan.programs()
        local_rank = getattr(world, "rank", 0)
        # Select the device first: it imports the kernel backend and so loads its
        # BLAS (scipy's OpenBLAS), which threadpoolctl can only limit once loaded.
        # The other order left the gemm kernels' BLAS at all cores on every rank.
        selected = select_device(device, local_rank)
        if not isinstance(world, SimulatedWorld):
            from .threads import configure_blas_threads
            configure_blas_threads(world.comm, threads)
        return cls(graph, world, plan, selected)

    # -- execution -------------------------------------------------------------------
    def execute(self, phases=None):
        """Run one step of the ops in `phases` (default all) on every rank."""
        self.check_inputs_bound()
        programs = self.plan.programs(phases)
        executors = {}
        for rank, store in self.stores.items():
            store.reset_peak()
            transport = wrap_transport(self.world.transport(rank), self.device,
                                       isinstance(self.world, SimulatedWorld))
            executors[rank] = RankExecutor(rank, programs[rank], self.plan.meta, store,
                                           transport, self.device.kernels, self.plan.window)
        start = time.perf_counter()
        try:
            self.world.run(executors)
        except BaseException:
            # FIX (runtime stage 3 tests): leave the stores as a fresh execute expects
            for rank, store in self.stores.items():
                store.drop_transient(self.plan.permanent[rank], self.plan.meta)
            raise
        self.device.synchronize()
        elapsed_ms = (time.perf_counter() - start) * 1e3
        for rank, executor in executors.items():
            self.stats[rank] = {"bytes_transferred": executor.bytes_sent,
                                "flops_executed": executor.flops,
                                "execution_time_ms": elapsed_ms,
                                "peak_bytes": self.stores[rank].peak}

    def wait(self):
        """execute() returns when this rank's program is done; kept for API symmetry."""
        self.device.synchronize()

    def get_stats(self, rank=None) -> dict:
        """What this rank (or a simulated `rank`) measured in the last execute()."""
        rank = self.world.rank if rank is None else rank
        return dict(self.stats[rank])

    # -- plan analysis -----------------------------------------------------------------
    def memory_on_rank(self, rank: int, phases=None) -> int:
        """Planned peak bytes on `rank` during one execute."""
        return self.plan.peak_bytes(rank, phases)

    def estimate_communication(self, rank=None, phases=None) -> int:
        """Planned tile payload bytes sent in one execute (all ranks, or one)."""
        return self.plan.bytes_sent(rank, phases)

    def estimate_flops(self, rank=None, phases=None) -> int:
        return self.plan.flops(rank, phases)

    def program(self, rank: int, phases=None) -> str:
        """The instruction listing of `rank`'s program."""
        return "\n".join(str(i) for i in self.plan.program(rank, phases))

    def dump_plan(self, phases=None) -> str:
        from ..plan.report import dump_plan
        return dump_plan(self.plan, phases)

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
