"""Runtime layer: the steps of compile before there is a CompiledGraph: the world that
`comm` names, the plan (through the plan cache, in a background thread for
compile_async) and the check that every rank derived the same one.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

from ..plan.cache import ENV_DIRECTORY, shared_cache
from ..plan.plan import HASHED_PARTS, plan_for
from ..plan.plan_options import PlanRequest
from .failure import install_abort_on_error
from .timeouts import resolve_timeout
from .world import World


def own_rank(world: World):
    """The rank whose program this process derives alone (docs/design.md): a real MPI rank's
    or a PlanningWorld's own; None for a world that runs every rank."""
    return None if world.runs_every_rank else world.rank


def plan_graph_cached(graph, request: PlanRequest, cache=None):
    """The plan with its programs derived (so a graph that cannot be planned, e.g.
    a tensor read before anything writes it, raises PlanError from compile on every
    rank rather than from the first execute), through `cache` when there is one.
    With `request.options.own_rank`, only that rank's program is derived."""
    rank = request.options.own_rank

    def build():
        plan = plan_for(graph, request)
        if rank is None:
            plan.programs()
        else:
            plan.program(rank)
        return plan
    if cache is None and os.environ.get(ENV_DIRECTORY):
        cache = shared_cache()
    if cache is None or cache is False:
        return build()
    cache = shared_cache() if cache is True else cache
    return cache.plan(graph, request, build)


class PendingCompile:
    """What compile_async returns: planning runs in a worker thread; result() waits
    for it, then does the collective half (all ranks call it, in the same order)."""

    def __init__(self, future, finish):
        self.future, self.finish, self.compiled = future, finish, None

    def done(self) -> bool:
        """True once planning has finished (result() then only does the collective part)."""
        return self.future.done()

    def result(self):
        """The CompiledGraph: waits for planning, then runs the collective half."""
        if self.compiled is None:
            self.compiled = self.finish(self.future.result())
        return self.compiled


_PLANNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="nntile-planner")


def plan_in_background(graph, request: PlanRequest, cache=None):
    """A future of plan_graph_cached's plan, planned in the one planner thread."""
    return _PLANNER.submit(plan_graph_cached, graph, request, cache)


def make_world(comm, recv_timeout):
    """The world `comm` names: a World (SimulatedWorld, PlanningWorld) as is, else the
    ranks of an MPI communicator (default MPI.COMM_WORLD)."""
    if isinstance(comm, World):
        resolve_timeout(recv_timeout)   # a bad value fails the same way on every world
        return comm
    from .mpi_world import MPIWorld   # only real MPI runs need mpi4py loaded
    world = MPIWorld(comm, recv_timeout)
    install_abort_on_error(world.rank, world.size)
    return world


# a plan option -> where a script sets it (a rank-local environment variable is the
# usual way one rank alone ends up with another value)
OPTION_SOURCES = {"fuse": "compile(fuse=...) or $NNTILE_SPMD_FUSE",
                  "deterministic": "compile(deterministic=...)",
                  "window": "compile(window=...)",
                  "offload policy": "compile(policy=..., memory_budget=...)"}


def check_same_plan(world, plan):
    """Raise on every rank (never hang) if ranks derived different plans."""
    parts = world.agree(plan.fingerprint_parts(), "compile: the ranks' plan fingerprints")
    differing = [(rank, part) for rank, theirs in enumerate(parts)
                 for part in theirs if theirs[part] != parts[0][part]]
    if differing:
        summary = world.agree(graph_summary(plan.graph), "compile: the ranks' graphs")
        details = "; ".join(describe_part(rank, part, parts) for rank, part in differing)
        diff = first_difference(summary)
        raise RuntimeError(f"ranks built different plans: {details}{diff}")


def describe_part(rank, part, parts) -> str:
    text = f"rank {rank} differs from rank 0 in its {part}"
    if part in HASHED_PARTS:
        return text
    source = f", set by {OPTION_SOURCES[part]}" if part in OPTION_SOURCES else ""
    return f"{text} ({parts[rank][part]} on rank {rank}, {parts[0][part]} on rank 0{source})"


def graph_summary(graph) -> tuple:
    """(tensor descriptions, op descriptions): what first_difference compares."""
    return ([t.describe() for t in graph.tensors()],
            [f"op {op.name} = {op.op_type}({', '.join(t.name for t in op.inputs)}) -> "
             f"{', '.join(t.name for t in op.outputs)}" for op in graph.ops()])


def first_difference(summaries):
    """The first tensor, else the first op, that differs between rank 0 and a rank."""
    for kind, index in (("tensor", 0), ("op", 1)):
        first = summaries[0][index]
        for rank, summary in enumerate(summaries[1:], start=1):
            for mine, theirs in zip(first, summary[index]):
                if mine != theirs:
                    return (f" (first {kind} difference: rank 0 has {mine}, rank {rank} has "
                            f"{theirs})")
            if len(summary[index]) != len(first):
                return (f" (rank 0 has {len(first)} {kind}s, rank {rank} has "
                        f"{len(summary[index])})")
    return ""
