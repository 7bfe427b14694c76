"""Train layer: the training loop, checkpoints, data order (docs/training.md).

Sits above graph/, plan/, runtime/, models/ and search/ (the Trainer's distribution="auto")
and uses their public API; imports no mpi4py (collectives go through CompiledGraph.world).
add_loss and add_optimizer are the models layer's (models/losses.py, models/optimizer.py),
named here too since a training script reaches for them beside the Trainer.
"""

from ..models.losses import add_loss
from ..models.optimizer import OptimizerInfo, add_optimizer
from .checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from .cli import add_checkpoint_args, checkpoint_options, resume_path
from .data import BatchView, batch_indices, bind_local, epoch_permutation
from .loop import Trainer
from .metrics import accuracy, cross_entropy_numpy
from .resume import CheckpointPolicy, complete_checkpoints, latest_checkpoint
from .safetensors_file import export_safetensors, import_safetensors
from .schedule import CosineSchedule

__all__ = ["CheckpointError", "export_safetensors", "import_safetensors", "load_checkpoint",
           "save_checkpoint", "BatchView", "batch_indices", "bind_local", "epoch_permutation",
           "Trainer", "accuracy", "add_loss", "cross_entropy_numpy", "OptimizerInfo",
           "add_optimizer", "add_checkpoint_args", "checkpoint_options", "resume_path",
           "CheckpointPolicy", "complete_checkpoints", "latest_checkpoint", "CosineSchedule"]
