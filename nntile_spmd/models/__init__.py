"""Models layer: ready-made graphs (MLP, CNN, GPT-2, Llama) and the pieces a training graph
adds to them (a loss head, an optimizer step). Builds LogicalGraphs; no runtime or MPI."""

from . import gpt2, llama
from .cnn import CNN, build_cnn
from .gpt2 import GPT2, GPT2Config, build_gpt2
from .llama import Llama, LlamaConfig, build_llama
from .losses import add_loss
from .mlp import MLP, build_mlp, init_linear_params
from .optimizer import OptimizerInfo, add_optimizer

__all__ = ["GPT2", "GPT2Config", "Llama", "LlamaConfig", "MLP", "build_gpt2", "build_llama",
           "build_mlp", "gpt2", "init_linear_params", "llama"]
__all__ += ["CNN", "build_cnn", "OptimizerInfo", "add_loss", "add_optimizer"]
