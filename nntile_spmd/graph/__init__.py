"""Graph layer: logical graph, op registry, builders. Imports no numba, cupy or mpi4py."""

from .autodiff import BACKWARD_RULES, grad
from .families import register_all
from .logical_graph import PHASES, LogicalGraph, OpNode
from .registry import REGISTRY, OpSpec, get_spec
from .seed_methods import TensorSpec
from .tensor import TensorNode

register_all(REGISTRY)   # the one place ops enter the registry (graph/families.py)

__all__ = ["grad", "BACKWARD_RULES", "LogicalGraph", "OpNode", "TensorNode", "OpSpec",
           "REGISTRY", "get_spec", "PHASES", "TensorSpec"]

# The seed's names (docs/seed_api.md) are importable from here too, as the NNTile 2.0
# plan writes `from nntile.graph import PhysicalGraph, ...`; they live above the graph
# layer (plan/, runtime/, seed_api/), so they load on first use, not with graph/.
SEED_NAMES = {
    "PhysicalGraph": "seed_api", "ExecutableGraph": "seed_api", "ComputeGraph": "seed_api",
    "DistributionPreset": "seed_api", "DistributionStrategy": "seed_api",
    "TaskHandle": "seed_api", "TaskGroup": "seed_api", "init": "seed_api",
    "shutdown": "seed_api", "register_op": "seed_api", "TilingStrategy": "plan",
    "TileDistribution": "plan",
    "ExecutionPolicy": "plan.offload",
}


def __getattr__(name):
    module = SEED_NAMES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib
    return getattr(importlib.import_module(f"nntile_spmd.{module}"), name)
