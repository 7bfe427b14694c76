"""Plan layer: what a plan is a function of beyond the graph, the tiling and the
distribution, as values given to the Plan constructor (plan/plan.py): the options
build_plan was asked for, and the task order of a pipelined preset.
"""

from __future__ import annotations

from typing import NamedTuple

from .offload import ExecutionPolicy
from .pipeline import batch_dims
from .presets import default_batch_class


class PlanOptions(NamedTuple):
    """What build_plan was asked beyond the graph, the tiling and the distribution."""

    deterministic: bool = False
    fuse: bool = False
    own_rank: int | None = None   # plan this rank's program only (None: every rank's)
    policy: ExecutionPolicy | None = None   # offloading; None: none


class PipelineOrder(NamedTuple):
    """How a pipelined preset orders the tasks (plan/pipeline.py): by micro-batch."""

    batch_dims: dict          # {tensor: its dim on the batch axis}
    one_f_one_b: object       # a pipeline.OneFOneB; None: GPipe


def pipeline_order(graph, class_of, classes, preset) -> PipelineOrder | None:
    """The pipelined preset's task order; None for a preset that does not pipeline."""
    if not preset.pipelined:
        return None
    batch_class = default_batch_class(graph, class_of, classes)
    return PipelineOrder(batch_dims(graph, class_of, batch_class), preset.one_f_one_b(graph))
