"""Search layer: what a large world's candidate costs, from its owners alone (no rank
program): the bytes each rank keeps across steps (parameters, gradients, optimizer
state), a lower bound of its peak, and an estimate of each rank's compute time.

Both come from `tensor_bytes_per_rank` (ranks.py), array sums over the owner arrays:
planning one rank's program of a 1,024-rank job takes seconds to minutes, these a
fraction of a second. The owner computes (the plan's rule), but a sum over tiles
(a weight gradient's sum over the batch) may instead run as partial sums next to
its inputs, so a rank's share of an op's work is the smaller of its share of the
output's bytes (a replicated output: all of it) and its largest share of an input's;
its time is that share of the op's FLOPs (bytes for ops that count none) at the
calibrated rate per unit. The estimate leaves out the per-task cost and messages
(both only add), and a rank holding a replicated input may still compute less than
its share says, so it is a sort key and a cheap first cut, not a bound; the memory
figure is a bound.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..graph.analysis import op_flops
from ..simulate.machine import op_type_of
from .ranks import tensor_bytes_per_rank


@dataclass(frozen=True)
class OwnerCost:
    """A candidate's cost from its owners alone."""

    kept_bytes: int        # the most bytes a rank keeps across steps: its peak's floor
    kept_rank: int
    compute_s: float       # the slowest rank's estimated compute time (see module text)
    heavy: tuple           # the ranks keeping the most and owning the most bytes


def owner_cost(plan, machine, threads) -> OwnerCost:
    """Kept bytes and estimated compute time per rank of `plan` (owners only)."""
    per_tensor = {tensor.name: tensor_bytes_per_rank(plan, tensor)
                  for tensor in plan.graph.tensors()}
    kept, owned = np.zeros(plan.nranks), np.zeros(plan.nranks)
    for tensor in plan.graph.tensors():
        owned += per_tensor[tensor.name]
        if tensor.keeps_storage:
            kept += per_tensor[tensor.name]
    seconds = np.zeros(plan.nranks)
    op_types = {op.name: op.op_type for op in plan.graph.ops()}
    for op in plan.graph.ops():
        if not op.outputs:
            continue
        output = op.outputs[0]
        share = per_tensor[output.name] / max(1, output.nbytes)
        if op.inputs:
            share = np.minimum(share, np.max([per_tensor[t.name] / max(1, t.nbytes)
                                              for t in op.inputs], axis=0))
        _, per_unit = machine.rate(op_type_of(op_types, op.name), threads)
        seconds += share * per_unit * (op_flops(op) or sum(t.nbytes for t in op.outputs))
    return OwnerCost(int(kept.max()), int(np.argmax(kept)), float(seconds.max()),
                     tuple(sorted({int(np.argmax(kept)), int(np.argmax(owned))})))
