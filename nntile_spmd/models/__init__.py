"""Models layer: ready-made graphs (MLP). Builds LogicalGraphs; imports no runtime or MPI."""

from .mlp import MLP, build_mlp, init_linear_params

__all__ = ["MLP", "build_mlp", "init_linear_params"]
