"""Runtime layer: CompiledGraph, the user's handle on a plan running on a world
(real MPI ranks or a SimulatedWorld): bind data, execute, read outputs and stats.
"""

from __future__ import annotations

import time

from ..plan.offload import resident_at_rest
from ..plan.plan import normalize_phases
from .binding import BindingMixin
from .compile_options import CompileOptions
from .compile_steps import (PendingCompile, check_same_plan, make_world, plan_graph_cached,
                            plan_in_background)
from .consistency import RankAgreement
from .device import for_graph
from .executor import ExecutorOptions
from .executor_threads import make_executor
from .finite_check import check_finite_from_env
from .limits import check_fits_in_memory
from .offload_store import OffloadStore
from .profile import ProfileMixin, profile_from_env
from .program_index import program_index
from .scalars import ResolvedProgram, ScalarTable
from .sharing import push_shared, share_tensors
from .thread_budget import TaskThreads
from .stats import ExecutionStats, build_stats, compare_with_plan, mismatches
from .staging import wrap_transport
from .storage import TileStore
from .world import refuse_unless_executing


def compile_async(graph, comm=None, tiling=None, distribution="single", shape_bindings=None,
                  device="auto", window=8, recv_timeout=None, threads=None,
                  deterministic=False, cache=None, fuse=None,
                  task_threads=None, policy=None, memory_budget=None) -> PendingCompile:
    """compile() with its planning in a background thread, so that planning the next
    shape overlaps with executing the current one. Planning is pure Python: it runs
    while the current execute's kernels (BLAS, numba) release the interpreter lock.
    The MPI part waits for result(), called on the caller's thread: no collective
    ever runs off the main thread."""
    options = CompileOptions.checked(
        "compile_async", graph, tiling=tiling, distribution=distribution, device=device,
        window=window, recv_timeout=recv_timeout, threads=threads,
        deterministic=deterministic, cache=cache, fuse=fuse, task_threads=task_threads,
        policy=policy, memory_budget=memory_budget)
    return compile_async_with(graph, comm, options, shape_bindings)


def compile_async_with(graph, comm, options: CompileOptions,
                       shape_bindings=None) -> PendingCompile:
    """compile_async of checked options (the search's distribution="auto" comes here)."""
    graph, world = bound_graph_and_world(graph, comm, shape_bindings, options.recv_timeout)
    future = plan_in_background(graph, options.plan_request(world), options.cache)
    return PendingCompile(future, lambda plan: CompiledGraph.from_plan(
        graph, world, plan, options))


def compile_with(graph, comm, options: CompileOptions, shape_bindings=None) -> CompiledGraph:
    """compile of checked options (the search's distribution="auto" comes here)."""
    graph, world = bound_graph_and_world(graph, comm, shape_bindings, options.recv_timeout)
    plan = plan_graph_cached(graph, options.plan_request(world), options.cache)
    return CompiledGraph.from_plan(graph, world, plan, options)


def bound_graph_and_world(graph, comm, shape_bindings, recv_timeout):
    """(`graph` with its symbolic dims bound, the world `comm` names), once the graph
    is known to fit the node's memory."""
    if shape_bindings:
        graph = graph.bind(shape_bindings)
    world = make_world(comm, recv_timeout)
    check_fits_in_memory(graph, world.size, len(world.local_ranks()))
    return graph, world


class CompiledGraph(BindingMixin, ProfileMixin):
    """A graph planned for a world; every rank calls the collective methods in order."""

    def __init__(self, graph, world, plan, device, task_threads=None):
        self.graph, self.world, self.plan, self.device = graph, world, plan, device
        self.threading = task_threads or TaskThreads(1)   # tile tasks side by side
        self.profiling = profile_from_env()   # record every execute's tasks (profile.py)
        self.events = {}     # rank -> events of the last execute, when profiling
        self.stores = {rank: TileStore(device.xp, device.storage_dtype)
                       for rank in world.local_ranks()}
        self.bound = {}   # tensor name -> local ranks whose tiles were bound
        self.stats = {}      # rank -> ExecutionStats of its last execute
        self.ops_by_name = {op.name: op for op in graph.ops()}
        self.scalars = ScalarTable(graph)
        self.resolved = {}   # (phases, rank) -> ResolvedProgram
        self.fused_kernels = {}   # the kernel table with the fused chains (fused_kernels.py)
        self.indexes = {}    # (phases, rank, check_finite) -> program_index.IndexEntry
        # check every task's outputs for NaN/+Inf, naming the first op (finite_check.py)
        self.check_finite = check_finite_from_env()
        self.agreement = RankAgreement(graph.name)
        self.graph_size = (len(graph.tensors()), len(graph.ops()))   # to notice later edits
        self.produced = set()  # tensors some execute() has computed (get_output checks)
        self.context = ""      # e.g. " (training step 12)": set by the trainer, for errors
        self.links = []        # (other graph, tensor names) sharing tiles (sharing.py)
        for rank, store in self.stores.items():
            rest = resident_at_rest(plan, rank)
            if plan.policy is not None:
                store.offload = OffloadStore(device.xp, device.storage_dtype, rank, rest)
            for key in sorted(plan.permanent[rank]):
                if key in rest:
                    store.allocate(key, plan.meta[key], zero=True)
                else:   # rests offloaded: a zeroed slot
                    store.offload.slot(key, plan.meta[key])[...] = 0

    @classmethod
    def compile(cls, graph, comm=None, tiling=None, distribution="single",
                shape_bindings=None, device="auto", window=8, recv_timeout=None,
                threads=None, deterministic=False, cache=None, fuse=None,
                task_threads=None, policy=None, memory_budget=None) -> CompiledGraph:
        """Plan `graph` on the ranks of `comm` (MPI.COMM_WORLD by default).

        `threads`, `task_threads`: this rank's threads, and how many run tile tasks
        side by side (docs/launching.md; 1 = the serial executor).

        `recv_timeout`: seconds any wait of the library (a tile, a collective) may
        last before the job ends with an error naming the silent rank; default
        $NNTILE_SPMD_RECV_TIMEOUT, else 300 (runtime/timeouts.py says why).
        `deterministic`: sums over tiles in tile index order on the output's owner, so
        with one tile grid the results are bitwise equal on any ranks and preset
        (plan.build_plan; docs/deterministic.md measures the cost).
        `cache`: a PlanCache (plans in memory and, with a directory, on disk), True for
        the process-wide in-memory one, or None (default: plan every time, unless
        $NNTILE_SPMD_PLAN_CACHE names a directory).
        `fuse`: run chains of elementwise tasks on one tile as one fused loop (plan/fusion.py;
        bitwise the same results); None reads $NNTILE_SPMD_FUSE (default off).
        `policy`: an ExecutionPolicy; with enable_offloading each rank's planned device
        bytes stay within its budget by EVICT/PREFETCH (plan/offload.py).
        `memory_budget=bytes` is short for offloading within that budget.
        `device`: "cpu", "cuda", or "auto" ($NNTILE_SPMD_DEVICE, else cuda where a small
        kernel runs on a GPU; runtime/device_choice.py). On a GPU with no `tiling`
        given, tiles are as large as the distribution allows (runtime/device_tiling.py).
        After compile, `cg.check_finite = True` (default $NNTILE_SPMD_CHECK_FINITE) makes
        the first task writing a NaN or +Inf raise, naming op, tile and rank.
        """
        options = CompileOptions.checked(
            "compile", graph, tiling=tiling, distribution=distribution, device=device,
            window=window, recv_timeout=recv_timeout, threads=threads,
            deterministic=deterministic, cache=cache, fuse=fuse, task_threads=task_threads,
            policy=policy, memory_budget=memory_budget)
        return compile_with(graph, comm, options, shape_bindings)

    @classmethod
    def from_plan(cls, graph, world, plan, options: CompileOptions) -> CompiledGraph:
        """The collective half of compile: ranks agree on the plan, pick a device."""
        check_same_plan(world, plan)
        selected, threading = world.setup_node(options.device, options.threads,
                                               options.task_threads, options.gpus)
        if selected.name != "cpu":
            threading = TaskThreads(1)   # a GPU rank's kernels are launches on one stream
        compiled = cls(graph, world, plan, for_graph(selected, graph), threading)
        world.where = f"the calls after compiling graph {graph.name!r}"   # for errors
        return compiled

    # -- execution -------------------------------------------------------------------
    def execute(self, phases=None):
        """Run one step of the ops in `phases` (default all) on every rank."""
        refuse_unless_executing(self.world, "execute")
        self.check_graph_unchanged("execute")
        self.check_inputs_bound()
        agreement, phases_key = self.agreement, normalize_phases(phases)
        self.world.where = (f"execute #{agreement.executes} of graph {self.graph.name!r}"
                            f"{self.context}")
        agreement.verify(self.world, phases_key, self.scalars.values)
        epoch = agreement.executes
        agreement.executes += 1
        executors = {}
        for rank, store in self.stores.items():
            transport = wrap_transport(self.world.transport(rank, epoch), self.device,
                                       self.world.cuda_aware)
            program = self.resolved_program(phases, rank)
            index = program_index(self.indexes, (phases_key, rank, self.check_finite),
                                  self.device, program, self.fused_kernels, self.plan.meta,
                                  self.check_finite)
            options = ExecutorOptions(
                window=self.plan.window, send_grace_s=self.world.send_grace_s,
                task_threads=self.threading.for_program((phases_key, rank), program),
                profiling=self.profiling)
            executors[rank] = make_executor(rank, program, store, transport, index, options)
        try:
            self.world.run(executors)
        except BaseException:
            for executor in executors.values():
                executor.abandon()      # no task thread may write a tile after this
            # a failed execute must not leave half-written transient tiles behind:
            # the next execute allocates them afresh
            for rank, store in self.stores.items():
                store.drop_transient(self.plan.permanent[rank], self.plan.meta)
            raise
        finally:
            push_shared(self)   # the linked graphs see this execute's tile arrays
        self.world.where = (f"the calls after execute #{epoch} of graph {self.graph.name!r}"
                            f"{self.context}")
        start = time.perf_counter()
        self.device.synchronize()    # queued GPU kernels belong to this execute's time
        sync_s = time.perf_counter() - start
        ran = phases_key
        self.produced.update(t.name for op in self.graph.ops() if op.phase in ran
                             for t in op.outputs)
        for rank, executor in executors.items():
            staging = getattr(executor.transport, "staging", None)
            self.stats[rank] = build_stats(rank, ran, self.ops_by_name, executor,
                                           self.stores[rank], staging,
                                           executor.busy_s + sync_s)
        if self.profiling:
            self.record_profile(executors, ran)

    def share_tensors(self, other, names) -> None:
        """From now on this graph's persistent tensors `names` are `other`'s tiles, not
        a copy: what either graph's execute writes, the other's next execute reads
        (runtime/sharing.py). Both graphs on the same world, each tensor persistent and
        planned alike in both (shape, dtype, tiling, tile holders), else ValueError.
        Collective: every rank calls it."""
        share_tensors(self, other, names)

    @property
    def task_threads(self) -> int:
        """Tile tasks run side by side on a rank in the last execute (or the fixed count)."""
        return self.threading.last

    def get_output(self, name: str, root=None):
        """The whole tensor on every rank, or on `root` only (None elsewhere)."""
        refuse_unless_executing(self.world, "get_output")   # before the computed check
        return super().get_output(name, root)

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

        Like every input, all ranks must set the same value: the next execute raises on
        every rank, naming the scalar and the values, if they differ.
        """
        self.scalars.set(name, value)

    def get_scalar(self, name: str) -> float:
        """The current value of runtime scalar `name`."""
        return self.scalars.get(name)

    def scalar_names(self) -> list:
        """Names of the graph's runtime scalars (see models.optimizer.add_optimizer)."""
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
        # a world that only plans lists its own rank: listing all would plan every rank
        ranks = None if self.world.executes else (self.world.rank,)
        return dump_plan(self.plan, phases, ranks)

    def fingerprint(self) -> str:
        return self.plan.fingerprint()


compile = CompiledGraph.compile  # noqa: A001 - the public name nt.compile
