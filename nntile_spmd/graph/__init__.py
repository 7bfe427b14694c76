"""Graph layer: logical graph, op registry, builders. Imports no numba, cupy or mpi4py."""

from .autodiff import BACKWARD_RULES, grad
from .families import register_all
from .logical_graph import PHASES, LogicalGraph, OpNode
from .registry import REGISTRY, OpSpec, get_spec
from .tensor import TensorNode

register_all(REGISTRY)   # the one place ops enter the registry (graph/families.py)

__all__ = ["grad", "BACKWARD_RULES", "LogicalGraph", "OpNode", "TensorNode", "OpSpec",
           "REGISTRY", "get_spec", "PHASES"]
