"""Graph layer: builders of the losses, re-exported by `nntile_spmd.ops`.
"""

from __future__ import annotations

from ..apply import apply
from ..checks import require_float, require_ignore_index, require_int
from ..reductions.ops import logsumexp
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
