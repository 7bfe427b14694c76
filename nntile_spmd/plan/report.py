"""Plan layer: the human-readable plan report (dump_plan)."""

from __future__ import annotations

from collections import Counter

from ..graph.recompute import recomputed_ops
from .distribution import REPLICATED


def human_bytes(count: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(count) < 1024 or unit == "GiB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    return str(count)


def tensor_lines(plan):
    lines = ["tensors:"]
    for tensor in plan.graph.tensors():
        spec = plan.tilings[tensor.name]
        owners = Counter(int(o) for o in plan.owners[tensor.name].reshape(-1))
        where = ("replicated" if set(owners) == {REPLICATED} else
                 " ".join(f"{owner_text(plan, r)}:{n}" for r, n in sorted(
                     owners.items(), key=lambda item: owner_order(plan, item[0]))))
        lines.append(f"  {tensor.describe():40s} {tensor.role:9s} tiles {list(spec.grid)} "
                     f"{spec!r} {plan.distributions[tensor.name]!r} -> {where}")
    return lines


def owner_text(plan, owner) -> str:
    """r3 for one rank, r* for every rank, r{1,3} for a mesh group."""
    if owner >= 0:
        return f"r{owner}"
    if owner == REPLICATED:
        return "r*"
    return "r{" + ",".join(str(r) for r in plan.ranks_of_owner(owner)) + "}"


def owner_order(plan, owner):
    """Ranks in order, then mesh groups by their ranks."""
    return (owner < REPLICATED, tuple(plan.ranks_of_owner(owner)) if owner < REPLICATED
            else (owner,))


def rank_lines(plan, phases, ranks=None):
    lines = ["ranks:  persistent   transient-peak   peak   sent   flops   instructions"]
    if ranks is None:
        plan.programs(phases)   # all ranks listed: one build of every program, not n
        ranks = range(plan.nranks)
    for rank in ranks:
        persistent = plan.persistent_bytes(rank)
        peak = plan.peak_bytes(rank, phases)
        transient = human_bytes(peak - persistent)
        lines.append(f"  r{rank}: {human_bytes(persistent):>10s} {transient:>12s}"
                     f" {human_bytes(peak):>10s} {human_bytes(plan.bytes_sent(rank, phases)):>10s}"
                     f" {plan.flops(rank, phases):>12d} {len(plan.program(rank, phases)):>8d}")
    return lines


def offload_lines(plan, phases, ranks=None):
    """Under an offloading policy: the budget, and per rank the bytes EVICTs write out
    and PREFETCHes read back in one execute, beside the planned device peak."""
    from .offload import offload_totals, resident_at_rest
    lines = [f"offloading: budget {human_bytes(plan.policy.budget())} per rank "
             f"(prefetch distance {plan.policy.prefetch_distance} EXECs)",
             "  rank:   peak   evicted   prefetched   persistent offloaded at rest"]
    for rank in range(plan.nranks) if ranks is None else ranks:
        evicted, prefetched = offload_totals(plan.program(rank, phases))
        resting = plan.persistent_bytes(rank) - sum(
            plan.meta[key].nbytes for key in resident_at_rest(plan, rank))
        lines.append(f"  r{rank}: {human_bytes(plan.peak_bytes(rank, phases)):>10s} "
                     f"{human_bytes(evicted):>10s} {human_bytes(prefetched):>10s} "
                     f"{human_bytes(resting):>12s}")
    return lines


def dump_plan(plan, phases=None, ranks=None) -> str:
    """Per tensor: tiling, distribution, owners; per rank (all, or `ranks`): memory,
    traffic, FLOPs. The total is over all ranks only when all are listed."""
    header = (f"plan of graph {plan.graph.name!r} on {plan.nranks} rank(s), receive window "
              f"{plan.window}, fingerprint {plan.fingerprint()}")
    if ranks is None:
        total = f"total bytes sent per execute: {human_bytes(plan.bytes_sent(None, phases))}"
    else:
        total = f"ranks listed: {list(ranks)} of {plan.nranks} (planned alone)"
    copies = recomputed_ops(plan.graph)
    if copies and ranks is None:
        extra = plan.recompute_flops(None, phases)
        total += (f"\nrecomputation: {len(copies)} forward ops run again in backward, "
                  f"{extra} FLOPs ({100 * extra / max(plan.flops(None, phases), 1):.1f}% "
                  "of the total)")
    elif copies:
        total += (f"\nrecomputation: {len(copies)} forward ops run again in backward, "
                  + ", ".join(f"r{r} {plan.recompute_flops(r, phases)} FLOPs" for r in ranks))
    dead = plan.dead_ops(phases)
    removed = f"dead ops left out: {', '.join(dead) if dead else 'none'}"
    offloading = offload_lines(plan, phases, ranks) if plan.policy else []
    tiling = ["tiling:"] + [f"  {line}" for line in plan.tiling_notes]
    return "\n".join([header, *tiling, *tensor_lines(plan), *rank_lines(plan, phases, ranks),
                      *offloading, total, removed])
