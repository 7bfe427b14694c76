"""Search layer: nt.compile and nt.compile_async with distribution="auto": the first
of autoplan's candidates, compiled (its distribution, tiling, recomputed graph and
offloading); any other distribution goes to the runtime's compile unchanged.
"""

from __future__ import annotations

from ..runtime.compile_options import CompileOptions
from ..runtime.compile_steps import make_world
from ..runtime.compiled import compile as compile_plan
from ..runtime.compiled import compile_async as compile_plan_async
from ..runtime.compiled import compile_async_with, compile_with
from .choose import autoplan
from .trials import options_for


def is_auto(distribution) -> bool:
    return isinstance(distribution, str) and distribution == "auto"


def choose(graph, comm, tiling, memory_budget, machine, arguments, caller):
    """(the first candidate, the world, the CompileOptions that compile it) for an
    "auto" compile. `arguments`, compile's other keywords, are checked before the
    search, which is collective (rank 0 calibrates, every rank takes its model), so it
    runs on the caller's thread, even for compile_async."""
    if tiling is not None:
        raise ValueError(f"{caller}(distribution='auto') chooses the tiling too; pass "
                         "tiling=None or a distribution")
    bindings = arguments.pop("shape_bindings", None)
    options = CompileOptions.checked(caller, graph, distribution="auto", **arguments)
    if bindings:
        graph = graph.bind(bindings)
    world = make_world(comm, options.recv_timeout)
    best = autoplan(graph, world, memory_budget, machine, trial_options=options)[0]
    return best, world, options_for(best, options)


def compile(graph, comm=None, tiling=None, distribution="single", *,  # noqa: A001
            memory_budget=None, machine=None, **options):
    """nt.compile: with distribution="auto", the first of autoplan's candidates;
    else as runtime.compile."""
    if not is_auto(distribution):
        return compile_plan(graph, comm, tiling, distribution, memory_budget=memory_budget,
                            **options)
    return compile_chosen(graph, comm, memory_budget=memory_budget, machine=machine,
                          tiling=tiling, **options)[0]


def compile_chosen(graph, comm=None, *, memory_budget=None, machine=None, tiling=None,
                   **options) -> tuple:
    """(CompiledGraph, Candidate): autoplan's first candidate compiled, and what it is
    (a Trainer compiles its evaluation graphs with the same choice)."""
    best, world, chosen = choose(graph, comm, tiling, memory_budget, machine, options,
                                 "compile")
    return compile_with(best.graph, world, chosen), best


def compile_async(graph, comm=None, tiling=None, distribution="single", *,
                  memory_budget=None, machine=None, **options):
    """nt.compile_async: with distribution="auto" the search runs now (collective),
    the chosen candidate's planning in the background; else as the runtime's."""
    if not is_auto(distribution):
        return compile_plan_async(graph, comm, tiling, distribution,
                                  memory_budget=memory_budget, **options)
    best, world, chosen = choose(graph, comm, tiling, memory_budget, machine, options,
                                 "compile_async")
    return compile_async_with(best.graph, world, chosen)
