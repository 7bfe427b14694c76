"""Search layer: plan one candidate and price it: its peak bytes on every planned
rank, the bytes it sends, and its predicted step time (the simulator's replay of
every rank in a small world, the worst representative rank's own time in a large
one; search/ranks.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..graph.recompute import recompute
from ..plan.offload import ExecutionPolicy
from ..plan.plan import PlanError, build_plan
from ..simulate.replay import predict
from .owners import owner_cost
from .ranks import (FULL_REPLAY_RANKS, SAMPLED_MARGIN, offload_seconds,
                    rank_seconds, representative_ranks)
from .space import recompute_segments

CANNOT_PLAN = "cannot plan"
OVER_BUDGET = "over the memory budget"


@dataclass
class Candidate:
    """A planned point of the search space and what the plan says it costs."""

    distribution: object             # a preset name or {axis: size}: compile's argument
    tiling: object                   # a TilingStrategy: compile's argument
    recompute: bool                  # activations recomputed in backward (graph.recompute)
    offload: bool                    # EVICT/PREFETCH within the memory budget
    predicted_step_s: float
    peak_bytes_per_rank: int         # the worst planned rank's peak
    bytes_sent_per_rank: int         # the worst planned rank's bytes sent per step
    label: str
    peaks: dict = field(repr=False, default_factory=dict)   # planned rank -> peak bytes
    graph: object = field(repr=False, default=None)   # what compile plans (recomputed copy)
    memory_budget: int | None = field(repr=False, default=None)
    plan: object = field(repr=False, default=None)    # while ranks are pending
    pending: list = field(repr=False, default_factory=list)   # ranks still to plan
    # the slowest rank's median step when autoplan timed it on the job's ranks
    # (trials.py), else None
    trial_step_s: float | None = None

    def compile_arguments(self) -> dict:
        """The keyword arguments of nt.compile that plan this candidate."""
        return {"tiling": self.tiling, "distribution": self.distribution,
                "memory_budget": self.memory_budget if self.offload else None}


class Scorer:
    """Plans candidates of one graph on one world size and prices them."""

    def __init__(self, graph, nranks, machine, memory_budget=None):
        self.graph, self.nranks, self.machine = graph, nranks, machine
        self.memory_budget = memory_budget
        self.full = nranks <= FULL_REPLAY_RANKS
        self._recomputed = None
        self.seen = set()    # plans already priced: (tilings, owners, variant)

    def can_recompute(self) -> bool:
        return any(op.phase == "backward" for op in self.graph.ops()) and \
            bool(recompute_segments(self.graph))

    def graph_for(self, choice):
        if not choice.recompute:
            return self.graph
        if self._recomputed is None:
            copy = self.graph.clone()
            recompute(copy, recompute_segments(copy))
            self._recomputed = copy
        return self._recomputed

    def threads(self) -> int:
        """A large world's rank threads: a rank per core (or more cores each), as a
        large job is launched."""
        return self.machine.threads_per_rank(min(self.nranks, self.machine.cores))

    def plan(self, choice):
        """The choice's plan (every rank's view in a small world, else a rank's), its
        ranks to price and, in a large world, its OwnerCost (owners.py)."""
        policy = (ExecutionPolicy(True, self.memory_budget, 1.0) if choice.offload
                  else None)
        plan = build_plan(self.graph_for(choice), self.nranks, choice.tiling(),
                          choice.distribution, rank=None if self.full else 0, policy=policy)
        if self.full:
            return plan, list(range(self.nranks)), None
        cost = owner_cost(plan, self.machine, self.threads())
        return plan, representative_ranks(choice.distribution, self.nranks,
                                          cost.heavy), cost

    def planned(self, choice):
        """(plan, ranks, OwnerCost), None when the plan equals one already priced, or
        the reason it was discarded (a string)."""
        try:
            plan, ranks, cost = self.plan(choice)
        except (PlanError, ValueError) as error:
            return f"{CANNOT_PLAN}: {error}"
        key = (repr(sorted((n, repr(t)) for n, t in plan.tilings.items())),
               repr(choice.distribution), choice.recompute, choice.offload)
        if key in self.seen:
            return None
        self.seen.add(key)
        if cost is not None and self.memory_budget is not None and \
                cost.kept_bytes > self.memory_budget:
            return (f"{OVER_BUDGET}: rank {cost.kept_rank} keeps {cost.kept_bytes} B "
                    "across steps (from the owners, before any program)")
        return plan, ranks, cost

    def score(self, choice, planned=None):
        """A Candidate, None when the plan equals one already priced, or the reason it
        was discarded (a string). In a large world the Candidate is rank 0's alone
        (`pending` names the ranks complete() adds): its time is then a lower bound.
        `planned`: what planned(choice) returned, if it was called."""
        planned = self.planned(choice) if planned is None else planned
        if planned is None or isinstance(planned, str):
            return planned
        plan, ranks, _ = planned
        first = ranks if self.full else [0]
        candidate = Candidate(choice.distribution, choice.tiling(), choice.recompute,
                              choice.offload, 0.0, 0, 0, choice.label, {},
                              self.graph_for(choice), self.memory_budget)
        candidate.plan, candidate.pending = plan, [r for r in ranks if r not in first]
        return self.add_ranks(candidate, first)

    def complete(self, candidate):
        """`candidate` with its pending representative ranks planned (or why not)."""
        pending, candidate.pending = candidate.pending, []
        return self.add_ranks(candidate, pending) if pending else candidate

    def add_ranks(self, candidate, ranks):
        plan = candidate.plan
        try:     # programs are derived here: offloading refuses a budget below a task
            candidate.peaks.update({rank: plan.peak_bytes(rank) for rank in ranks})
        except PlanError as error:
            return f"{OVER_BUDGET}: {error}"
        peaks = candidate.peaks
        worst = max(peaks.values())
        margin = 1.0 if self.full else 1.0 + SAMPLED_MARGIN
        if self.memory_budget is not None and worst * margin > self.memory_budget:
            return (f"{OVER_BUDGET}: peak {worst} B on rank {max(peaks, key=peaks.get)} "
                    "exceeds it")
        candidate.peak_bytes_per_rank = worst
        candidate.bytes_sent_per_rank = max(candidate.bytes_sent_per_rank,
                                            max(plan.bytes_sent(rank) for rank in ranks))
        candidate.predicted_step_s = max(candidate.predicted_step_s,
                                         self.step_seconds(plan, ranks))
        if not candidate.pending:
            candidate.plan = None     # the programs are large; compile plans again
        return candidate

    def step_seconds(self, plan, ranks) -> float:
        if self.full:
            prediction = predict(plan, self.machine)
            copies = max(offload_seconds(plan, rank, self.machine) for rank in ranks) \
                if plan.policy is not None else 0.0
            return prediction.step_s + copies
        return max(rank_seconds(plan, rank, self.machine, self.threads()) for rank in ranks)
