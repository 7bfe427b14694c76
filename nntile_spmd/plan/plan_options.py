"""Plan layer: what a plan is a function of beyond the graph, as values: the options
build_plan was asked for (PlanOptions, given to the Plan constructor), those with the
world size, the tiling and the distribution (PlanRequest: the whole question, which the
plan cache keys on), and the task order of a pipelined preset.
"""

from __future__ import annotations

import dataclasses
import numbers
from typing import NamedTuple

import numpy as np

from ..graph.logical_graph import LogicalGraph
from .offload import ExecutionPolicy
from .pipeline import batch_dims
from .presets import default_batch_class
from .tiling import TilingStrategy


DEFAULT_WINDOW = 8     # tiles received ahead


@dataclasses.dataclass(frozen=True)
class PlanOptions:
    """What build_plan was asked beyond the graph, the world size, the tiling and the
    distribution (checked by build_plan or compile before one is made)."""

    window: int = DEFAULT_WINDOW   # RECVs posted ahead of the first unfinished one
    deterministic: bool = False    # sums over tiles in tile order on the output's owner
    fuse: bool = False             # elementwise chains on one tile as one task
    own_rank: int | None = None    # plan this rank's program only (None: every rank's)
    policy: ExecutionPolicy | None = None   # offloading; None: none


@dataclasses.dataclass(frozen=True)
class PlanRequest:
    """Everything a plan is a pure function of beyond the graph: what the plan cache
    keys on (plan/cache.py) and what plan.plan_for plans."""

    nranks: int
    tiling: object = None            # a TilingStrategy; None: TilingStrategy.auto()
    distribution: object = "single"  # a preset name, a mesh dict or {tensor: distribution}
    options: PlanOptions = PlanOptions()


def is_int(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def is_bool(value) -> bool:
    return isinstance(value, (bool, np.bool_))


# argument of compile/build_plan -> (accepts, what it must be, error otherwise): a value
# of the wrong type failed late with an AttributeError (compile(None)) or was taken
# for its truth (deterministic="no" meant True)
ARGUMENT_RULES = {
    "graph": (lambda value: isinstance(value, LogicalGraph), "a LogicalGraph"),
    "window": (is_int, "an int (tiles received ahead)"),
    "deterministic": (is_bool, "True or False"),
    "fuse": (lambda value: value is None or is_bool(value),
             "True, False or None (None reads $NNTILE_SPMD_FUSE)"),
    "tiling": (lambda value: value is None or isinstance(value, TilingStrategy),
               "a TilingStrategy or None (tile shapes by tensor name are "
               "TilingStrategy.manual({name: [tile per dim]}))"),
}


def check_arguments(caller: str, **arguments) -> None:
    """Raise TypeError naming the first argument that ARGUMENT_RULES refuses."""
    for name, value in arguments.items():
        accepts, expected = ARGUMENT_RULES[name]
        if not accepts(value):
            raise TypeError(f"{caller}: {name} must be {expected}, got {value!r}")


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
