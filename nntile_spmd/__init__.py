"""nntile_spmd: train neural networks on tiled tensors spread over MPI ranks (SPMD).

Every rank builds the same LogicalGraph, derives the same plan (tiling, owners,
per-rank programs) and runs only its own program; docs/design.md is the public API,
docs/architecture.md the layers.
"""

from .graph import LogicalGraph, OpNode, TensorNode, grad, ops
from .graph.recompute import recompute
from .graph.scalars import Scalar
from .plan import (REPLICATED, DevicePerformanceProfile, DimensionTiling, Plan, PlanCache,
                   PlanError, Preset, TileDistribution, TilingSpec, TilingStrategy, build_plan)
from .plan.mesh import Mesh
from .plan.offload import ExecutionPolicy
from .runtime import CompiledGraph, PendingCompile, PlanningWorld, SimulatedWorld
from .search import autoplan, compile, compile_async   # with distribution="auto" too
from .graph import OpSpec, TensorSpec
from .seed_api import (ComputeGraph, DistributionPreset, DistributionStrategy,  # seed names
                       ExecutableGraph, PhysicalGraph, TaskGroup, TaskHandle, init,
                       register_op, shutdown)
from .runtime.failure import install_abort_on_error
from .version import __version__  # noqa: F401  (setup.cfg reads version.py)

install_abort_on_error()   # only under an MPI launcher with > 1 rank; loads no mpi4py

__all__ = ["grad", "LogicalGraph", "OpNode", "TensorNode", "ops", "REPLICATED",
           "DevicePerformanceProfile", "DimensionTiling", "Plan", "PlanError", "Preset",
           "TileDistribution", "TilingSpec", "TilingStrategy", "build_plan", "CompiledGraph",
           "PlanningWorld", "SimulatedWorld", "compile", "compile_async", "PendingCompile",
           "PlanCache", "Scalar"]
__all__ += ["Mesh", "recompute"]   # device meshes, activation recomputation
__all__ += ["ExecutionPolicy"]     # planned offloading under a memory budget
__all__ += ["autoplan"]            # the plan chosen by a search (search/)
__all__ += ["OpSpec", "TensorSpec", "ComputeGraph", "DistributionPreset",  # the seed's API
            "DistributionStrategy", "ExecutableGraph", "PhysicalGraph", "TaskGroup",
            "TaskHandle", "init", "register_op", "shutdown"]   # (docs/seed_api.md)
