"""Train layer: losses, optimizers, the training loop, checkpoints (docs/training.md).

Sits below graph/, plan/ and runtime/ and uses their public API; imports no mpi4py
(collectives go through CompiledGraph.world).
"""

from .checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from .cli import add_checkpoint_args, checkpoint_options, resume_path
from .data import BatchView, batch_indices, bind_local, epoch_permutation
from .loop import Trainer
from .losses import accuracy, add_loss, cross_entropy_numpy
from .optim import OptimizerInfo, add_optimizer
from .resume import CheckpointPolicy, complete_checkpoints, latest_checkpoint
from .safetensors_file import export_safetensors, import_safetensors
from .schedule import CosineSchedule

__all__ = ["CheckpointError", "export_safetensors", "import_safetensors", "load_checkpoint",
           "save_checkpoint", "BatchView", "batch_indices", "bind_local", "epoch_permutation",
           "Trainer", "accuracy", "add_loss", "cross_entropy_numpy", "OptimizerInfo",
           "add_optimizer", "add_checkpoint_args", "checkpoint_options", "resume_path",
           "CheckpointPolicy", "complete_checkpoints", "latest_checkpoint", "CosineSchedule"]
