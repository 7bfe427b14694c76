"""Seed API: the NNTile 2.0 plan's three-stage names (seed 003 §4.1.1, §4.1.4, §5.1-5.2)
as thin layers over the engine: LogicalGraph's seed methods (graph/seed_methods.py),
PhysicalGraph, ExecutableGraph, ComputeGraph, TaskHandle/TaskGroup, init/shutdown.
docs/seed_api.md maps every seed name to ours and lists what is not built yet.
"""

from ..graph.seed_methods import TensorSpec
from .asynchronous import TaskGroup, TaskHandle
from .compute_graph import ComputeGraph
from .executable import ExecutableGraph
from .lifecycle import init, shutdown
from .physical import DistributionPreset, DistributionStrategy, PhysicalGraph
from .user_ops import register_op

__all__ = ["TensorSpec", "TaskGroup", "TaskHandle", "ComputeGraph", "ExecutableGraph", "init",
           "shutdown", "DistributionPreset", "DistributionStrategy", "PhysicalGraph",
           "register_op"]
