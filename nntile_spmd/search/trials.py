"""Search layer: time the most promising candidates on the job's own ranks.

The replay prices a plan from calibrated costs. Where it cannot tell the first
candidates apart, or where the job's ranks outnumber the node's cores and the
scheduler's hand-offs between ranks decide the step (core sharing "node" or
"bound": a plan that exchanges many messages ran up to twice its prediction there,
one without messages close to it; docs/benchmarks.md, "autoplan's trials"), a
few steps of each say more than the model. So in an MPI job the candidates
predicted within `TRIAL_BAND` of the first are compiled one at a time, run for
`TRIAL_STEPS` steps after a warm-up on zero-filled inputs (the ops' time does not
depend on the values; zeros cost no initialisation) and ordered by the slowest
rank's median step; the others follow in predicted order. Where the first trials
show the model erring by more than the band, the candidates predicted faster than
the fastest step measured are timed too. Every rank times the same
candidates in the same order and takes the same maxima, so all choose alike.
"""

from __future__ import annotations

import dataclasses
import gc
import statistics
import time

import numpy as np

from ..graph.dtypes import storage_dtype
from ..plan.offload import as_policy
from ..runtime.binding import needs_binding

# How far behind the first candidate's prediction a candidate is still timed: with
# a core per rank the model's error is about the goal's 10 %; sharing cores, the
# replay misses the scheduler's hand-offs and is off by up to 2x.
TRIAL_BAND = {"own": 1.1, "node": 2.0, "bound": 2.0}
TRIAL_STEPS = 3
TRIAL_LIMIT = 6


def check_trials(trials) -> None:
    if trials is not None and (isinstance(trials, bool) or not isinstance(trials, int)
                               or trials < 0):
        raise ValueError(f"autoplan: trials must be a number of candidates >= 0 or None, "
                         f"got {trials!r}")


def measurable(world) -> bool:
    """A step can be timed only where each rank runs in a process of its own."""
    return world.executes and not world.runs_every_rank


def worth_timing(candidate, first, fastest_s, band) -> bool:
    """Might `candidate` still be the fastest? Its prediction is within `band` of the
    first's, or below the fastest step measured so far (the model then errs by more
    than the band, and says it would beat what has been seen)."""
    return candidate.predicted_step_s <= max(first.predicted_step_s * band, fastest_s)


def time_candidates(candidates, world, machine, trials, log, options=None) -> list:
    """Time candidates (ranked by prediction) in order: `trials` an int, the first that
    many; None, while worth_timing says so, at most TRIAL_LIMIT, and where ranks share
    cores also the one sending the fewest bytes; only on the real ranks of an MPI job
    (of two or more ranks when `trials` is None). Returns those timed."""
    if not measurable(world) or trials == 0 or (trials is None and world.size < 2):
        return []
    band = TRIAL_BAND[machine.core_sharing]
    timed = []
    for candidate in candidates[:TRIAL_LIMIT if trials is None else trials]:
        fastest = min((c.trial_step_s for c in timed), default=float("inf"))
        if trials is None and timed and not worth_timing(candidate, candidates[0], fastest,
                                                         band):
            break     # predictions only grow down the list: none after it is either
        timed.append(time_one(candidate, world, log, options))
    if trials is None and machine.core_sharing != "own":
        # the plan exchanging the fewest bytes is the one the replay prices best on
        # shared cores (no hand-offs to miss): the baseline the others must beat
        quiet = min(candidates, key=lambda c: (c.bytes_sent_per_rank, c.predicted_step_s))
        if all(c is not quiet for c in timed):
            timed.append(time_one(quiet, world, log, options))
    return timed


def time_one(candidate, world, log, options):
    candidate.trial_step_s = time_steps(candidate, world, options)
    if log:
        log(f"trial {candidate.label}: {candidate.trial_step_s * 1e3:.2f} ms a step "
            f"(predicted {candidate.predicted_step_s * 1e3:.2f} ms)")
    return candidate


def run_trials(candidates, world, machine, trials=None, log=None, options=None) -> list:
    """`candidates` (ranked by prediction) reordered: the timed ones first, by their
    measured step (`trial_step_s`), then the rest as they were. `options`: the
    CompileOptions the chosen one will be compiled with. Collective."""
    started = time.perf_counter()
    timed = time_candidates(candidates, world, machine, trials, log, options)
    if not timed:
        return candidates
    if log:
        log(f"trials: {len(timed)} candidate(s) timed in "
            f"{time.perf_counter() - started:.1f} s")
    order = sorted(timed, key=lambda c: (c.trial_step_s, c.predicted_step_s, c.label))
    chosen = {id(c) for c in timed}
    return order + [c for c in candidates if id(c) not in chosen]


def options_for(candidate, options):
    """`options` (a CompileOptions: the caller's other compile arguments) with the
    candidate's distribution, tiling and offloading."""
    chosen = candidate.compile_arguments()
    return dataclasses.replace(options, tiling=chosen["tiling"],
                               distribution=chosen["distribution"],
                               policy=as_policy(options.policy, chosen["memory_budget"]))


def time_steps(candidate, world, options=None, steps=TRIAL_STEPS) -> float:
    """The slowest rank's median execute of `candidate` compiled on `world` (with the
    caller's other compile `options`, else compile's defaults), after a warm-up (kernel
    compilation, first touch of the buffers)."""
    from ..runtime.compiled import compile as compile_plan
    from ..runtime.compiled import compile_with
    cg = compile_with(candidate.graph, world, options_for(candidate, options)) \
        if options is not None else \
        compile_plan(candidate.graph, world, **candidate.compile_arguments())
    try:
        bind_zeros(cg)
        seconds = []
        for step in range(steps + 1):
            world.agree(None, "the start of a trial step")     # all ranks start together
            start = time.perf_counter()
            cg.execute()
            slowest = max(world.agree(time.perf_counter() - start, "a trial step's time"))
            if step:
                seconds.append(slowest)
        return statistics.median(seconds)
    finally:
        del cg
        gc.collect()      # the trial's tiles go before the next candidate's


def bind_zeros(cg) -> None:
    """Zeros for every tensor an execute needs bound (inputs, constants, parameters)."""
    for tensor in cg.graph.tensors():
        if needs_binding(tensor):
            cg.bind_data(tensor.name, np.zeros(tensor.shape, storage_dtype(tensor.dtype)))
