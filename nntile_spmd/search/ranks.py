"""Search layer: which ranks a large world's candidate is planned on, and what one
rank's program costs on a machine model without replaying the others.

A world of up to FULL_REPLAY_RANKS ranks is planned whole and replayed by the
simulator. A larger one is planned per rank (Plan.program(rank) derives one rank's
program alone): the representative ranks are index 0, 1 and the last along every
mesh axis (of a preset: of the world), and the worst of them stands for the world.
Why those: every placement rule is a formula of the rank's index along each axis
(plan/mesh.py). Blocks put a dimension's uneven tail on the last index,
round-robin shards give the first indexes the extra tiles, gather trees start at the
owner and relay through the next index, and the pipeline's first and last stages
hold the embedding and the head. tests/search checks on small worlds that the worst
representative equals the worst of all ranks.
"""

from __future__ import annotations

import itertools

from ..plan.instructions import Evict, Exec, Prefetch, Recv, Send
from ..simulate.machine import op_type_of, task_work

FULL_REPLAY_RANKS = 8
MAX_REPRESENTATIVES = 6


def axis_indexes(size) -> list:
    return sorted({0, min(1, size - 1), size - 1})


def representative_ranks(distribution, nranks) -> list:
    """The ranks a candidate of a large world is planned on (see the module text)."""
    shape = (nranks,) if isinstance(distribution, str) else tuple(distribution.values())
    corners = [axis_indexes(size) for size in shape]
    ranks = []
    for index in itertools.product(*corners):
        rank = 0
        for value, size in zip(index, shape):
            rank = rank * size + value
        ranks.append(rank)
    if len(ranks) > MAX_REPRESENTATIVES:
        # corners (first and last on every axis) first, then index 1 along one axis
        ranks.sort(key=lambda r: (sum(v == 1 for v in unravel(r, shape)), r))
        ranks = ranks[:MAX_REPRESENTATIVES]
    return sorted(set(ranks))


def unravel(rank, shape) -> list:
    index = []
    for size in reversed(shape):
        rank, value = divmod(rank, size)
        index.append(value)
    return index[::-1]


def rank_seconds(plan, rank, machine, threads) -> float:
    """One rank's step time alone: its tasks and the CPU of its SENDs, RECVs and
    offload copies, or the time its link needs for the bytes it receives, whichever
    is longer. Waits on other ranks (a pipeline's bubble, a reduction's chain) are not
    in it, so it is a bound the replay of a small world refines."""
    op_types = {op.name: op.op_type for op in plan.graph.ops()}
    cpu, link = 0.0, 0.0
    for instruction in plan.program(rank):
        kind = type(instruction)
        if kind is Exec:
            cpu += machine.task_seconds(op_type_of(op_types, instruction.op_name),
                                        task_work(instruction, plan.meta), threads)
        elif kind is Send:
            cpu += machine.send_seconds(instruction.nbytes)
        elif kind is Recv:
            cpu += machine.recv_seconds(instruction.nbytes)
            link += machine.message_seconds(instruction.nbytes)
        elif kind in (Evict, Prefetch):
            cpu += offload_copy_seconds(machine, instruction.nbytes)
    return max(cpu, link)


def offload_copy_seconds(machine, nbytes) -> float:
    """An EVICT or PREFETCH is a copy between tiers: priced as a RECV's copy (the
    replay does not model them)."""
    return machine.recv_seconds(nbytes)


def offload_seconds(plan, rank, machine) -> float:
    """The copies of `rank`'s EVICTs and PREFETCHes in one execute."""
    return sum(offload_copy_seconds(machine, i.nbytes) for i in plan.program(rank)
               if type(i) in (Evict, Prefetch))
