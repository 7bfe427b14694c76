"""CuPy kernels of the cuda table for slices (a tensor x and its slices along `axis`),
log-space reductions, masks and cross-entropy over a split vocabulary.

Part of the cuda table (cuda.py imports these). Arrays only: imports CuPy, never
nntile_spmd or mpi4py; the same calling convention as kernels.reference. Nothing here
synchronizes the stream except the label check of cross-entropy (it must raise).
"""

import math

try:
    import cupy as cp
except ImportError as error:  # only this backend needs CuPy
    raise ImportError(
        "kernels.cuda needs CuPy with a working CUDA install (e.g. `pip install cupy-cuda12x`); "
        "use kernels.get_kernels('cpu') on machines without an NVIDIA GPU"
    ) from error

from .errors import label_error


def _store(out, value, beta, previous):
    """out = value + beta*previous, never reading `previous` when beta == 0 (may be garbage)."""
    if beta == 0.0:
        out[...] = value
    else:
        out[...] = value + beta * previous


def _wide(dtype):
    """Dtype that products are carried in: fp16 is widened to fp32 (as in cuda.py)."""
    return cp.float32 if dtype == cp.float16 else dtype


# ---------------------------------------------------------------- slices
# A slice of x along `axis` is x with that axis removed; expand_dims broadcasts it back.


def sumprod_slice(x, y, z, *, axis, alpha=1.0, beta=0.0):
    """z = alpha * sum over `axis` of x*y (that axis removed) + beta*z; sums in float64."""
    total = (x.astype(_wide(x.dtype), copy=False) * y).sum(axis=axis, dtype=cp.float64)
    _store(z, alpha * total, beta, z)


def sumprod_slice_backward(s, x, dx, *, axis, alpha=1.0):
    """dx += alpha * s (broadcast along `axis`) * x."""
    dx += alpha * cp.expand_dims(s, axis) * x


def softmax_from_logsumexp(lse, x, y, *, axis):
    """y = exp(x - lse), lse broadcast along `axis` (the softmax when lse = logsumexp(x))."""
    y[...] = cp.exp(x - cp.expand_dims(lse, axis))


def softmax_from_logsumexp_backward(y, dy, d, dx, *, axis):
    """dx += y * (dy - d), d broadcast along `axis` (d = sumprod_slice(y, dy))."""
    dx += y * (dy - cp.expand_dims(d, axis))


def mask_scalar(mask, x, y, *, val, batch_ndim=0):
    """y = x where mask, else val; mask has x's leading dims, broadcast over the batch dims."""
    y[...] = cp.where(mask.reshape(mask.shape + (1,) * batch_ndim), x, val)


def sum_slice(x, s, *, axis, alpha=1.0, beta=0.0):
    """s = alpha * sum over `axis` of x (that axis removed) + beta*s; sums in float64."""
    _store(s, alpha * x.sum(axis=axis, dtype=cp.float64), beta, s)


def add_slice(s, x, z, *, axis, alpha=1.0, beta=1.0):
    """z = alpha * s (broadcast along `axis`) + beta*x (x is not read when beta == 0)."""
    _store(z, alpha * cp.expand_dims(s, axis), beta, x)


def multiply_slice(s, x, z, *, axis, alpha=1.0):
    """z = alpha * s (broadcast along `axis`) * x."""
    z[...] = alpha * cp.expand_dims(s, axis) * x


# -inf marks an entry that takes no part (a masked score): a slice of all -inf has
# logsumexp -inf and -inf merged with -inf stays -inf. CuPy's own logaddexp computes
# fabs(a - b), which is nan for two -inf, hence _logaddexp.


def _log(coefficient):
    """log of a non-negative coefficient (alpha, beta of the merges); log(0) = -inf."""
    return math.log(coefficient) if coefficient > 0 else -math.inf


def _finite_or_zero(top):
    """The shift subtracted before exp: the max where finite, else 0 (no inf - inf)."""
    return cp.where(cp.isfinite(top), top, 0)


def _logaddexp(a, b):
    """log(exp(a) + exp(b)), elementwise; two -inf give -inf, never nan."""
    top = cp.maximum(a, b)
    shift = _finite_or_zero(top)
    return cp.where(cp.isfinite(top), shift + cp.log1p(cp.exp(cp.minimum(a, b) - shift)), top)


def logsumexp(x, y, *, axis, beta=0.0):
    """y = log(exp(lse) + beta*exp(y)), lse = log(sum(exp(x))) along `axis` (dropped)."""
    top = x.max(axis=axis)
    finite = cp.isfinite(top)
    shift = _finite_or_zero(top)
    total = cp.exp(x - cp.expand_dims(shift, axis)).sum(axis=axis)
    lse = cp.where(finite, shift + cp.log(cp.where(finite, total, 1)), top)
    y[...] = lse if beta == 0.0 else _logaddexp(lse, y + _log(beta))


def logsumexp_merge(x, y, z, *, alpha=1.0, beta=1.0):
    """z = log(alpha*exp(x) + beta*exp(y)): merges two partial logsumexps (beta == 0: y unread)."""
    scaled = x + _log(alpha) if alpha != 1.0 else x
    z[...] = scaled if beta == 0.0 else _logaddexp(scaled, y + _log(beta))


def logsumexp_backward(x, y, dy, dx, *, axis):
    """dx += exp(x - y) * dy, y and dy broadcast along `axis`; -inf entries of x get 0."""
    dx += cp.exp(x - cp.expand_dims(_finite_or_zero(y), axis)) * cp.expand_dims(dy, axis)


# ---------------------------------------------------------------- cross-entropy


def valid_count(labels, count, *, ignore_index=-100, beta=0.0):
    """count (0-d) = number of labels != ignore_index + beta*count."""
    _store(count, cp.count_nonzero(labels != ignore_index), beta, count)


def _check_labels(kernel, labels, valid, num_classes, ignore_index):
    # A CPU-GPU sync point: raising needs the verdict on the host. Only class tile 0
    # calls this, once per batch tile (every position meets class tile 0 exactly once).
    bad = valid & ((labels < 0) | (labels >= num_classes))
    if bool(bad.any()):
        raise label_error(kernel, labels[bad].ravel()[0], num_classes, ignore_index)


def cross_entropy_lse(logits, lse, labels, count, loss, *, ignore_index=-100, num_classes,
                      class_offset=0, beta=0.0):
    """loss = sum over labels != ignore_index of (lse - logits[label]) / count + beta*loss,
    for the class tile starting at `class_offset` (tile 0 adds lse, checks the labels)."""
    valid = labels != ignore_index
    if class_offset == 0:
        _check_labels("cross_entropy_lse", labels, valid, num_classes, ignore_index)
    local = labels - class_offset
    hit = valid & (local >= 0) & (local < logits.shape[0])
    picked = cp.take_along_axis(logits, cp.where(hit, local, 0)[cp.newaxis], axis=0)[0]
    total = -cp.where(hit, picked, 0).sum(dtype=cp.float64)
    if class_offset == 0:
        total = total + cp.where(valid, lse, 0).sum(dtype=cp.float64)
    _store(loss, total / count, beta, loss)   # count 0 (all ignored): nan, as in PyTorch


def cross_entropy_lse_backward(logits, lse, labels, count, dloss, dlogits, *,
                               ignore_index=-100, num_classes, class_offset=0):
    """dlogits += dloss/count * (exp(logits - lse) - onehot(label)) at labels != ignore_index."""
    valid = labels != ignore_index
    if class_offset == 0:
        _check_labels("cross_entropy_lse_backward", labels, valid, num_classes, ignore_index)
    classes = cp.arange(class_offset, class_offset + logits.shape[0])
    onehot = classes.reshape((-1,) + (1,) * labels.ndim) == labels
    # where() keeps dloss/count on the device; with count 0 nothing is valid
    scale = cp.where(valid, dloss / cp.where(count == 0, 1, count), 0)
    dlogits += scale * (cp.exp(logits - lse) - onehot)
