"""Search layer: autoplan, the search itself: walk the candidate space (space.py),
price each candidate (score.py), drop those over the memory budget, rank the rest.
"""

from __future__ import annotations

import time

from ..runtime.compile_steps import make_world
from .machine import machine_for
from .score import CANNOT_PLAN, Scorer
from .space import choices, dominated
from .trials import check_trials, run_trials


def autoplan(graph, comm=None, memory_budget=None, machine=None, log=None,
             tilings=None, trials=None, trial_options=None) -> list:
    """Candidate plans of `graph` on the ranks of `comm` (a World, an MPI communicator,
    or None: MPI.COMM_WORLD), fastest first (by their trial steps where timed, else by
    the prediction); every one fits `memory_budget`
    bytes on every planned rank. `machine`: a MachineModel or a machine file (default:
    a quick calibration on rank 0). `log(line)` hears what was discarded and why.
    `tilings`: TilingStrategies to try in place of the table's auto tile sizes (a
    large model's shape may need its own, as benchmarks/bench_plan_rank.py's).
    `trials`: in an MPI job, how many of the first candidates to run for a few steps
    and order by their measured step (trials.py); None: those predicted within
    TRIAL_BAND of the first; 0: none, the order is the prediction's. `trial_options`:
    the CompileOptions the trials compile with (compile(distribution="auto") passes
    its own, so that a trial runs as the chosen plan will), else compile's defaults."""
    if memory_budget is not None and (isinstance(memory_budget, bool) or
                                      not isinstance(memory_budget, int) or
                                      memory_budget <= 0):
        raise ValueError(f"autoplan: memory_budget must be a positive number of bytes, "
                         f"got {memory_budget!r}")
    check_trials(trials)
    world = make_world(comm, None)
    started = time.process_time()
    scorer = Scorer(graph, world.size, machine_for(world, machine, log), memory_budget)
    choice_list = choices(world.size, memory_budget is not None, scorer.can_recompute(),
                          large=not scorer.full, tilings=tilings)
    candidates = price_choices(scorer, choice_list, log) if scorer.full else \
        price_large(scorer, choice_list, log)
    if not candidates:
        raise ValueError(f"autoplan: no candidate plan of graph {graph.name!r} fits a "
                         f"memory budget of {memory_budget} bytes per rank on "
                         f"{world.size} rank(s)")
    candidates.sort(key=lambda c: (c.predicted_step_s, c.peak_bytes_per_rank, c.label))
    candidates = run_trials(candidates, world, scorer.machine, trials, log, trial_options)
    if log:
        log(f"autoplan: {len(candidates)} candidates in "
            f"{time.process_time() - started:.1f} s of CPU")
    return candidates


def price_choices(scorer, choice_list, log) -> list:
    """Candidates of the choices that plan and fit; a plan equal to one already priced,
    a distribution that cannot be planned and a memory variant dominated by a lighter
    one that fits are skipped (space.py)."""
    candidates, fitting, duplicate, unplannable = [], set(), set(), set()
    for choice in choice_list:
        if choice.group in duplicate or repr(choice.distribution) in unplannable or \
                dominated(choice, fitting):
            continue
        began = time.process_time()
        result = scorer.score(choice)
        if log and not isinstance(result, str):
            log(f"priced {choice.label} in {time.process_time() - began:.2f} s")
        if result is None:
            duplicate.add(choice.group)
        elif isinstance(result, str):
            if result.startswith(CANNOT_PLAN):   # the distribution, whatever the tiles
                unplannable.add(repr(choice.distribution))
            if log:
                log(f"discarded {choice.label}: {result}")
        else:
            fitting.add(choice.group + (choice.recompute, choice.offload))
            candidates.append(result)
    return candidates


def plan_choices(scorer, choice_list, log) -> list:
    """A large world's choices planned (tilings and owners, no program), each with
    its OwnerCost; a duplicate plan, a distribution that cannot be planned and one
    whose kept bytes exceed the budget on some rank are left out."""
    planned, unplannable = [], set()
    for choice in choice_list:
        if repr(choice.distribution) in unplannable:
            continue
        began = time.process_time()
        result = scorer.planned(choice)
        if isinstance(result, str):
            if result.startswith(CANNOT_PLAN):
                unplannable.add(repr(choice.distribution))
            if log:
                log(f"discarded {choice.label}: {result}")
        elif result is not None:
            planned.append((choice, result))
            if log:
                log(f"planned {choice.label} in {time.process_time() - began:.2f} s: "
                    f"owner estimate {result[2].compute_s * 1e3:.1f} ms")
    return planned


def price_large(scorer, choice_list, log) -> list:
    """A large world: every choice planned from its owners (plan_choices), then, in
    order of the owners' estimate, priced on rank 0 (a lower bound: a step is its
    slowest rank's) and its other representative ranks. A candidate is dropped
    without a rank program once the best finished one is faster than its estimate,
    and after rank 0 once the best is faster than rank 0 alone."""
    planned = sorted(plan_choices(scorer, choice_list, log), key=lambda p: p[1][2].compute_s)
    finished, fitting, best, dropped = [], set(), float("inf"), []
    for choice, result in planned:
        if dominated(choice, fitting):
            continue
        if result[2].compute_s >= best:
            dropped.append(f"{choice.label} (estimate)")
            continue
        began = time.process_time()
        candidate = scorer.score(choice, result)
        if not isinstance(candidate, str) and candidate.predicted_step_s >= best:
            dropped.append(f"{choice.label} (rank 0)")
            continue
        if not isinstance(candidate, str):
            candidate = scorer.complete(candidate)
        if log:
            log(f"priced {choice.label} in {time.process_time() - began:.2f} s"
                + (f"; discarded: {candidate}" if isinstance(candidate, str) else ""))
        if not isinstance(candidate, str):
            finished.append(candidate)
            fitting.add(choice.group + (choice.recompute, choice.offload))
            best = min(best, candidate.predicted_step_s)
    if log and dropped:
        log(f"{len(dropped)} candidate(s) dropped, slower than the best: {', '.join(dropped)}")
    return finished
