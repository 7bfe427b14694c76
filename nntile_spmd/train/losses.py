"""Train layer: loss builders for graphs, and the NumPy references used to check them.

Builds ops through nntile_spmd.graph only; imports no plan, runtime, numba or mpi4py.
"""

from __future__ import annotations

import numpy as np

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


def cross_entropy_numpy(logits, labels, alpha=1.0) -> float:
    """Reference: alpha * sum_b -log softmax(logits[:, b])[labels[b]]; logits (classes, batch)."""
    logits = np.asarray(logits, dtype=np.float64)
    shifted = logits - logits.max(axis=0, keepdims=True)
    log_norm = np.log(np.exp(shifted).sum(axis=0))
    picked = shifted[np.asarray(labels), np.arange(logits.shape[1])]
    return float(alpha * np.sum(log_norm - picked))


def accuracy(logits, labels) -> float:
    """Fraction of columns whose largest logit is at the label; logits (classes, batch)."""
    return float(np.mean(np.argmax(np.asarray(logits), axis=0) == np.asarray(labels)))
