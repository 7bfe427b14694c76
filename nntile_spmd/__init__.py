"""nntile_spmd: train neural networks on tiled tensors spread over MPI ranks (SPMD)."""

from .graph import LogicalGraph, OpNode, TensorNode
from .graph import ops

__all__ = ["LogicalGraph", "OpNode", "TensorNode", "ops"]
__version__ = "0.1.0"
