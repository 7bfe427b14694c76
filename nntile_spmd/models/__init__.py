"""Models layer: ready-made graphs (MLP, GPT-2). Builds LogicalGraphs; imports no runtime or MPI."""

from . import gpt2
from .gpt2 import GPT2, GPT2Config, build_gpt2
from .mlp import MLP, build_mlp, init_linear_params

__all__ = ["GPT2", "GPT2Config", "MLP", "build_gpt2", "build_mlp", "gpt2", "init_linear_params"]
