"""Train layer: the NumPy references the Trainer reports a loss and an accuracy with.

Plain NumPy on gathered logits; the graph's loss ops are models/losses.py's.
"""

from __future__ import annotations

import numpy as np


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
