"""Search layer: which ranks a large world's candidate is planned on, and what one
rank's program costs on a machine model without replaying the others.

A world of up to FULL_REPLAY_RANKS ranks is planned whole and replayed by the
simulator. A larger one is planned per rank (Plan.program(rank) derives one rank's
program alone) on representative ranks: on every mesh axis (of a preset: the world)
the indexes 0, 1 and the last, and the indexes of two heavy ranks found from the
owners alone (no program): the one keeping the most persistent bytes and the one
owning the most bytes of all tiles; their combinations, at most MAX_REPRESENTATIVES.
Why those: every placement rule is a formula of the rank's index along each axis
(plan/mesh.py). Blocks put a dimension's uneven tail on some index, round-robin
shards with per-tensor offsets give some indexes extra tiles, gather trees start at
the owner and relay through the next index, and a pipeline's first and last stages
hold the embedding and the head. That is a sample, not a proof: where every rank can
be planned, the sample's worst came within 6 % of the world's (tests/search), hence
SAMPLED_MARGIN on the budget check.
"""

from __future__ import annotations

import itertools

import numpy as np

from ..graph.dtypes import ITEMSIZE
from ..plan.distribution import REPLICATED
from ..plan.instructions import Evict, Exec, Prefetch, Recv, Send
from ..simulate.machine import op_type_of, task_work

FULL_REPLAY_RANKS = 8
# How far the representative ranks' worst may fall short of the world's (measured
# up to 6 % on the small worlds tests/search plans whole): a large world's candidate
# is kept only if its sampled peak plus this margin fits the budget.
SAMPLED_MARGIN = 0.1
MAX_REPRESENTATIVES = 8


def axis_indexes(size) -> list:
    return sorted({0, min(1, size - 1), size - 1})


def representative_ranks(distribution, nranks, heavy=()) -> list:
    """The ranks a candidate of a large world is planned on (see the module text):
    on every mesh axis the indexes 0, 1, the last and those of the `heavy` ranks,
    combined; at most MAX_REPRESENTATIVES, the heavy ranks and corners first."""
    shape = (nranks,) if isinstance(distribution, str) else tuple(distribution.values())
    heavy_indexes = [unravel(rank, shape) for rank in heavy]
    per_axis = [sorted(set(axis_indexes(size)) | {index[axis] for index in heavy_indexes})
                for axis, size in enumerate(shape)]
    ranks = [ravel(index, shape) for index in itertools.product(*per_axis)]

    def priority(rank):
        index = unravel(rank, shape)
        return (rank not in heavy,
                sum(value not in (0, size - 1) for value, size in zip(index, shape)), rank)

    return sorted(sorted(ranks, key=priority)[:MAX_REPRESENTATIVES])


def ravel(index, shape) -> int:
    rank = 0
    for value, size in zip(index, shape):
        rank = rank * size + value
    return rank


def tensor_bytes_per_rank(plan, tensor):
    """Bytes of `tensor`'s tiles each rank holds (a group's tiles count on each member)."""
    spec = plan.tilings[tensor.name]
    nbytes = np.full((), float(ITEMSIZE[tensor.dtype]))
    for dim in spec.dims:                       # tile bytes: outer product of dim sizes
        nbytes = np.multiply.outer(nbytes, np.array(dim.sizes, dtype=float))
    owners = np.broadcast_to(np.asarray(plan.owners[tensor.name]), nbytes.shape).ravel()
    nbytes = nbytes.ravel()
    result = np.zeros(plan.nranks)
    single = owners >= 0
    result += np.bincount(owners[single], weights=nbytes[single], minlength=plan.nranks)
    result += nbytes[owners == REPLICATED].sum()
    grouped = owners < REPLICATED
    for code in np.unique(owners[grouped]):
        result[list(plan.ranks_of_owner(int(code)))] += nbytes[owners == code].sum()
    return result


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
