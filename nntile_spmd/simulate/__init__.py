"""Predict a job's step time and memory before it runs: replay the per-rank
programs on a machine model measured by ``python -m nntile_spmd.calibrate``.

    python -m nntile_spmd.simulate --model gpt2 --ranks 8 --strategy fsdp --timeline t.png
"""

from .machine import MachineModel
from .replay import Prediction, predict

__all__ = ["MachineModel", "Prediction", "predict", "simulate"]


def simulate(graph, nranks: int, machine: MachineModel | None = None, tiling=None,
             distribution="single", phases=None, ranks_per_node=None) -> Prediction:
    """Plan `graph` for `nranks` ranks (no MPI needed) and predict one execute."""
    from ..plan.plan import build_plan
    plan = build_plan(graph, nranks, tiling, distribution)
    return predict(plan, machine or MachineModel(), phases, ranks_per_node)
