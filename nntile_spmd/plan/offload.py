"""Plan layer: planned offloading under a memory budget per rank (NNTile 2.0's
ExecutionPolicy.enable_offloading / offload_threshold).

One rank's finished program (FREEs placed, chains fused) is walked with the
memory model of plan/memory.py. Where an instruction would take the rank's
device-resident bytes over the budget, EVICTs are inserted before it for the
resident tiles whose next use lies furthest ahead (Belady's rule: exact, since
the whole program is known), and a PREFETCH before every later use of an evicted
tile. A tile whose next touch overwrites it (a RECV, or an EXEC that writes it
without reading) is the first to go and costs no copy. Prefetches are then moved
up to `prefetch_distance` EXECs ahead of their use where the budget allows, so a
copy can overlap with the tasks before it (the threaded executor's workers run
them while the executor thread copies).

Persistent tiles (parameters, optimizer state) may stay offloaded between
executes: `rest_set` picks the ones resident at rest, those Belady keeps at the
end of the all-phases program (their next use is then in the next execute), and
every program ends by restoring that state, so programs of any phase set may run
in any order.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..graph.logical_graph import PHASES
from .instructions import Evict, Prefetch
from .offload_pass import plan_offload, rest_set


PLACEMENTS = ("auto", "owner_computes", "explicit")


@dataclass(unsafe_hash=True)
class ExecutionPolicy:
    """How a rank may use its memory (NNTile 2.0's policy). With enable_offloading, each rank's
    planned device bytes stay within offload_threshold x memory_budget.

    The seed's fields (§5.1) come last, keywords only in practice, and may be assigned
    after construction as the seed's §5.2 does; compile takes a copy (as_policy), so a
    later assignment changes no compiled plan. compile honours placement ("owner_computes":
    every sum over tiles on the output tile's owner in tile order, i.e. deterministic=True;
    "auto": partial sums where they move fewer bytes; "explicit": owner computes, and the
    tiles of each tensor `placement_map` names, so the tasks writing them, on the ranks
    its TileDistribution gives) and prefetch (False: offloaded tiles come back only at
    use) and preferred_gpus (the GPUs a node's ranks take in turn: local rank i takes
    preferred_gpus[i % len]; runtime/device.py gpu_of)."""

    enable_offloading: bool = False
    memory_budget: int = 0          # device bytes per rank
    offload_threshold: float = 0.8  # fraction of memory_budget the plan may fill (NNTile's default)
    prefetch_distance: int = 4      # EXECs a prefetch may run ahead of its use
    placement: str = "auto"
    preferred_gpus: object = field(default=None, hash=False)
    prefetch: bool = True
    placement_map: dict | None = field(default=None, hash=False)   # "explicit": {name: dist}

    def __post_init__(self):
        check_placement(self.placement)

    def budget(self) -> int:
        return int(self.memory_budget * self.offload_threshold)


def as_policy(policy=None, memory_budget=None):
    """The ExecutionPolicy of compile's arguments, or None when nothing is offloaded.
    memory_budget=bytes is short for offloading with the whole budget usable."""
    if memory_budget is not None:
        if policy is not None:
            raise ValueError("pass either policy= or memory_budget=, not both")
        policy = ExecutionPolicy(True, memory_budget, 1.0)
    if policy is None or not policy.enable_offloading:
        return None
    check_placement(policy.placement)
    # a snapshot (the user may assign the fields later); prefetch=False: at use
    policy = replace(policy, prefetch_distance=policy.prefetch_distance if policy.prefetch
                     else 0)
    if not isinstance(policy.memory_budget, int) or policy.budget() <= 0:
        raise ValueError(f"offloading needs a positive memory_budget in bytes, got "
                         f"{policy.memory_budget!r} x threshold {policy.offload_threshold}")
    if policy.prefetch_distance < 0:
        raise ValueError(f"prefetch_distance must be >= 0, got {policy.prefetch_distance}")
    return policy


def check_placement(placement):
    if placement not in PLACEMENTS:
        raise ValueError(f"ExecutionPolicy.placement must be one of {PLACEMENTS}, "
                         f"got {placement!r}")


def offload_totals(program) -> tuple:
    """(bytes written out by EVICTs, bytes read back by PREFETCHes) of one program."""
    written = sum(i.nbytes for i in program if type(i) is Evict and i.write_back)
    read = sum(i.nbytes for i in program if type(i) is Prefetch)
    return written, read


def rank_program(plan, program, rank, phase_key) -> list:
    """Plan.finish_program's last step under an offloading policy."""
    rests = plan._rest_sets   # the plan's memo: a pure function of the plan
    if phase_key == PHASES and rank not in rests:   # the program the rest set comes from
        rests[rank] = rest_set(program, plan.meta, plan.permanent[rank], plan.policy,
                               plan.window, rank)
    return plan_offload(program, plan.meta, plan.permanent[rank], resident_at_rest(plan, rank),
                        plan.policy, plan.window, rank)


def resident_at_rest(plan, rank) -> frozenset:
    """The persistent tiles `rank` keeps in device memory between executes."""
    if plan.policy is None:
        return frozenset(plan.permanent[rank])
    cached = plan._rest_sets
    if rank not in cached:
        program = plan._build_rank_program(PHASES, rank, offloaded=False)
        cached[rank] = rest_set(program, plan.meta, plan.permanent[rank], plan.policy,
                                plan.window, rank)
    return cached[rank]


def offload_slot_bytes(plan, rank, phases=None) -> int:
    """Bytes of `rank`'s second tier: the persistent tiles resting offloaded and every
    tile the program evicts (each tile has one slot, runtime/offload_store.py)."""
    keys = set(plan.permanent[rank]) - resident_at_rest(plan, rank)
    keys.update(i.key for i in plan.program(rank, phases) if type(i) is Evict)
    return sum(plan.meta[key].nbytes for key in keys)
