"""Graph layer: builders of the losses, re-exported by `nntile_spmd.ops`.
"""

from __future__ import annotations

import math

from ..apply import apply
from ..checks import require_float, require_ignore_index, require_int, require_same_dtype
from ..reductions.ops import logsumexp, sum_slice, sumprod_slice
from ..registry import op_error


def valid_count(labels, name, ignore_index=-100, dtype="fp32"):
    """count (0-d, of `dtype`) = number of labels that are not ignore_index."""
    return apply("valid_count", [labels], [name], ignore_index=ignore_index, dtype=dtype)


def cross_entropy_lse(logits, lse, labels, count, name, ignore_index=-100):
    """loss (0-d) = sum over labels != ignore_index of (lse - logits[label]) / count.

    lse must be logsumexp(logits, axis 0) and count valid_count(labels); a label outside
    [0, V) that is not ignore_index raises IndexError when the op runs.
    """
    return apply("cross_entropy_lse", [logits, lse, labels, count], [name],
                 ignore_index=ignore_index)


def cross_entropy_lse_backward(logits, lse, labels, count, grad_loss, grad_logits,
                               ignore_index=-100):
    """grad_logits += grad_loss / count * (softmax(logits) - onehot(label)) at valid labels."""
    return apply("cross_entropy_lse_backward", [logits, lse, labels, count, grad_loss],
                 [grad_logits], ignore_index=ignore_index)


def cross_entropy(logits, labels, name, ignore_index=-100):
    """Mean cross-entropy (0-d) over the labels that are not ignore_index, as
    torch.nn.functional.cross_entropy(reduction="mean") with PyTorch's ignore_index:
    nan when every label is ignored.

    logits are [V, batch...] (classes first), labels int [batch...]. Emits
    logsumexp ({name}_lse), valid_count ({name}_count) and cross_entropy_lse (`name`):
    the class axis may be split over tiles and ranks (vocab-parallel).
    """
    # everything is checked before the first op is added
    require_float("cross_entropy", logits)
    require_int("cross_entropy", labels)
    if logits.ndim < 1 or labels.shape != logits.shape[1:]:
        raise op_error("cross_entropy", f"{labels.name} must have the shape of {logits.name} "
                       "without its class axis 0", (logits, labels))
    require_ignore_index("cross_entropy", {"ignore_index": ignore_index}, (logits, labels))
    lse = logsumexp(logits, f"{name}_lse", axis=0)
    count = valid_count(labels, f"{name}_count", ignore_index, dtype=logits.dtype)
    return cross_entropy_lse(logits, lse, labels, count, name, ignore_index)


def cross_entropy_loss(logits, labels, name, alpha=1.0):
    """loss = alpha * sum over the batch of -log softmax(logits)[label]."""
    return apply("cross_entropy_loss", [logits, labels], [name], alpha=alpha)


def cross_entropy_loss_backward(logits, labels, grad_loss, grad_logits, alpha=1.0):
    """grad_logits += alpha * grad_loss * (softmax(logits) - onehot(labels))."""
    return apply("cross_entropy_loss_backward", [logits, labels, grad_loss],
                 [grad_logits], alpha=alpha)


def mse_loss(x, y, name, alpha=1.0):
    """loss = alpha * sum((x - y)^2)."""
    return apply("mse_loss", [x, y], [name], alpha=alpha)


def mse_loss_backward(x, y, grad_loss, grad_x, alpha=1.0):
    """grad_x += 2 * alpha * grad_loss * (x - y)."""
    return apply("mse_loss_backward", [x, y, grad_loss], [grad_x], alpha=alpha)


SOFT = "cross_entropy_soft"
SOFT_PARTS = ("lse", "dot", "smooth", "target", "mass", "weighted", "per_sample")


def cross_entropy_soft(logits, targets, name, label_smoothing=0.0):
    """Mean over the batch of -sum_c t_c log softmax(logits)_c (0-d), with soft targets:
    `targets` shaped like `logits` [V, batch...] (classes first) hold probabilities
    (one-hot rows give cross_entropy's value); label_smoothing eps uses
    t' = (1 - eps) t + eps / V, as torch.nn.functional.cross_entropy with probability
    targets.

    A composite of ordinary ops, per sample lse * sum_c t'_c - sum_c t'_c x_c: the class
    axis may be split over tiles and ranks, and nt.grad differentiates it through their
    rules (logits and targets alike). Intermediates are named f"{name}_{part}" for part
    in SOFT_PARTS.
    """
    require_float(SOFT, logits, targets)
    require_same_dtype(SOFT, logits, targets)
    if logits.ndim < 1 or targets.shape != logits.shape:
        raise op_error(SOFT, f"{targets.name} must have the shape of {logits.name} "
                       "[classes, batch...]", (logits, targets))
    if not isinstance(label_smoothing, (int, float)) or not 0.0 <= label_smoothing < 1.0:
        raise op_error(SOFT, f"label_smoothing={label_smoothing!r} must be in [0, 1)",
                       (logits, targets))
    if not all(isinstance(dim, int) for dim in logits.shape):
        raise op_error(SOFT, "needs concrete dims (bind the symbols first)", (logits, targets))
    taken = [f"{name}_{p}" for p in SOFT_PARTS if logits.graph.has_tensor(f"{name}_{p}")]
    if taken:
        raise op_error(SOFT, f"tensor name {taken[0]!r} is already in use", (logits, targets))
    parts = {part: f"{name}_{part}" for part in SOFT_PARTS}
    eps, classes = float(label_smoothing), logits.shape[0]
    lse = logsumexp(logits, parts["lse"], axis=0)
    dot = sumprod_slice(targets, logits, parts["dot"], axis=0, alpha=1.0 - eps)
    smooth = sum_slice(logits, parts["smooth"], axis=0, alpha=eps / classes)
    target_logit = apply("add", [dot, smooth], [parts["target"]], alpha=1.0, beta=1.0)
    mass = sum_slice(targets, parts["mass"], axis=0, alpha=1.0 - eps)
    # mass += eps in place: add_scalar has no inputs, so nt.grad passes d/dmass through
    # it unchanged (a shift has derivative 1), as layer_norm's var + eps
    apply("add_scalar", [], [mass], value=eps)
    weighted = apply("multiply", [lse, mass], [parts["weighted"]], alpha=1.0)
    per_sample = apply("sub", [weighted, target_logit], [parts["per_sample"]])
    return apply("sum", [per_sample], [name], alpha=1.0 / math.prod(logits.shape[1:]),
                 beta=0.0)
