"""Graph layer: logical graph, op registry, builders. Imports no numba, cupy or mpi4py."""

from . import (rules_elementwise, rules_fiber, rules_linalg, rules_loss,  # noqa: F401
               rules_reduce, rules_rope, rules_slice, rules_train, rules_util)
from . import rules_math, rules_math_fiber, rules_random  # noqa: F401 - seed ops
from . import rules_data  # noqa: F401 - slice, gather, scatter, reshape, log_scalar
from . import rules_conv  # noqa: F401 - seed convolutions, copy_intersection
from .autodiff import BACKWARD_RULES, grad
from .logical_graph import PHASES, LogicalGraph, OpNode
from .registry import REGISTRY, OpSpec, get_spec
from .tensor import TensorNode

__all__ = ["grad", "BACKWARD_RULES", "LogicalGraph", "OpNode", "TensorNode", "OpSpec",
           "REGISTRY", "get_spec", "PHASES"]
