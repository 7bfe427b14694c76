"""Models layer: the loss heads a model graph ends with, by name (add_loss).

Builds ops through nntile_spmd.graph only; imports no plan, runtime, numba or mpi4py.
"""

from __future__ import annotations

from ..graph import ops


def cross_entropy(logits, target, name, alpha):
    """alpha * sum over the batch of -log softmax(logits)[label]; target: int64 labels."""
    return ops.cross_entropy_loss(logits, target, name, alpha=alpha)


def mse(prediction, target, name, alpha):
    """alpha * sum of squared differences; target has the prediction's shape."""
    return ops.mse_loss(prediction, target, name, alpha=alpha)


LOSSES = {"cross_entropy": cross_entropy, "mse": mse}


def add_loss(kind: str, prediction, target, name: str, alpha: float):
    """Add the loss `kind` ("cross_entropy" or "mse") as a new 0-d tensor `name`."""
    if kind not in LOSSES:
        raise ValueError(f"unknown loss {kind!r}; expected one of {sorted(LOSSES)}")
    return LOSSES[kind](prediction, target, name, alpha)
