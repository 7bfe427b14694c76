"""NumPy reference kernels: the living specification the cpu and cuda tables must match.

Arrays only: imports NumPy and SciPy, never nntile_spmd, mpi4py, numba or cupy.
Calling convention: ``KERNELS[name](*inputs, *outputs, **params)`` writes the
outputs in place and returns None; an output may be the same object as an input;
with ``beta == 0`` an output's previous contents are never read.
"""

import numpy as np
from scipy.special import erf, expit

from . import KERNEL_NAMES
from .errors import label_error, vocab_error
from .layout import gemm_folds
from .reference_norm import (multiply_fiber, pow, pow_backward,  # noqa: F401 - in KERNELS
                             sumprod_fiber, sumprod_fiber_backward)
from .reference_math import MATH_KERNELS
from .reference_rope import rope, rope_backward, scale_slice  # noqa: F401 - in KERNELS
from .reference_slice import (add_slice, logsumexp, logsumexp_backward,  # noqa: F401
                              logsumexp_merge, mask_scalar, multiply_slice,  # (all in KERNELS)
                              softmax_from_logsumexp, softmax_from_logsumexp_backward,
                              sum_slice, sumprod_slice, sumprod_slice_backward)

_SQRT_2_OVER_PI = np.sqrt(2.0 / np.pi)
_GELU_TANH_CUBIC = 0.044715


def _store(out, value, beta, previous):
    """out = value + beta*previous, never reading `previous` when beta == 0 (may be garbage)."""
    if beta == 0.0:
        out[...] = value
    else:
        out[...] = value + beta * previous


def _wide(dtype):
    """Dtype that products and sums are carried in: fp16 is widened to fp32."""
    return np.float32 if dtype == np.float16 else dtype


# ---------------------------------------------------------------- products


def _batch_first(x, shape3, trans):
    """F-order (rows, cols, batch) view of a gemm operand as (batch, op rows, op cols)."""
    return x.reshape(shape3, order="F").transpose((2, 1, 0) if trans else (2, 0, 1))


def gemm(a, b, c, *, alpha=1.0, beta=0.0, trans_a=False, trans_b=False, ndim=1, batch_ndim=0):
    """c = alpha*op(a)·op(b) + beta*c with NNTile's multi-dim and batch rules."""
    a3, b3, _ = gemm_folds(a.shape, b.shape, trans_a, trans_b, ndim, batch_ndim)
    wide = _wide(c.dtype)
    product = np.matmul(
        _batch_first(a, a3, trans_a).astype(wide), _batch_first(b, b3, trans_b).astype(wide)
    )  # (batch, m, n)
    product = product.transpose(1, 2, 0).reshape(c.shape, order="F")
    _store(c, alpha * product, beta, c)


def transpose(x, y, *, alpha=1.0, ndim):
    """y = alpha * x with its first `ndim` dims moved to the end."""
    order = tuple(range(ndim, x.ndim)) + tuple(range(ndim))
    y[...] = alpha * np.transpose(x, order)


# ---------------------------------------------------------------- elementwise


def add(x, y, z, *, alpha, beta):
    """z = alpha*x + beta*y (y is not read when beta == 0)."""
    _store(z, alpha * x, beta, y)


def multiply(x, y, z, *, alpha=1.0):
    """z = alpha*x*y."""
    z[...] = alpha * x * y


def scale(x, y, *, alpha):
    """y = alpha*x."""
    y[...] = alpha * x


def add_scalar(x, *, value):
    """x += value in place (also on int64 step counters)."""
    np.add(x, value, out=x, casting="unsafe")


def fill(x, *, value):
    """x[...] = value."""
    x.fill(value)


def clear(x):
    """x[...] = 0."""
    x.fill(0)


def copy(x, y):
    """y = x."""
    np.copyto(y, x)


def cast(x, y):
    """y = x converted to y.dtype."""
    np.copyto(y, x, casting="unsafe")


def gelu(x, y):
    """y = 0.5*x*(1 + erf(x/sqrt(2)))."""
    y[...] = 0.5 * x * (1.0 + erf(x / np.sqrt(2.0)))


def gelutanh(x, y):
    """y = 0.5*x*(1 + tanh(sqrt(2/pi)*(x + 0.044715*x^3)))."""
    y[...] = 0.5 * x * (1.0 + np.tanh(_SQRT_2_OVER_PI * (x + _GELU_TANH_CUBIC * x**3)))


def relu(x, y):
    """y = max(x, 0)."""
    y[...] = np.maximum(x, 0)


def silu(x, y):
    """y = x*sigmoid(x)."""
    y[...] = x * expit(x)


def sqrt(x, y):
    """y = sqrt(x)."""
    y[...] = np.sqrt(x)


def gelu_backward(x, dy, dx):
    """dx += gelu'(x)*dy."""
    cdf = 0.5 * (1.0 + erf(x / np.sqrt(2.0)))
    pdf = np.exp(-0.5 * x * x) / np.sqrt(2.0 * np.pi)
    dx += (cdf + x * pdf) * dy


def gelutanh_backward(x, dy, dx):
    """dx += gelutanh'(x)*dy."""
    t = np.tanh(_SQRT_2_OVER_PI * (x + _GELU_TANH_CUBIC * x**3))
    inner = _SQRT_2_OVER_PI * (1.0 + 3.0 * _GELU_TANH_CUBIC * x * x)
    dx += (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * inner) * dy


def relu_backward(x, dy, dx):
    """dx += (x > 0)*dy."""
    dx += np.where(x > 0, dy, 0)


def silu_backward(x, dy, dx):
    """dx += sigmoid(x)*(1 + x*(1 - sigmoid(x)))*dy."""
    s = expit(x)
    dx += s * (1.0 + x * (1.0 - s)) * dy


def sqrt_backward(x, dy, dx):
    """dx += dy/(2*sqrt(x))."""
    dx += dy / (2.0 * np.sqrt(x))


# ---------------------------------------------------------------- reductions


def sum(x, y, *, alpha=1.0, beta=0.0):  # noqa: A001 - the kernel's name in every table
    """y (0-d) = alpha*sum(x) + beta*y."""
    _store(y, alpha * x.sum(dtype=np.float64), beta, y)


def _fiber_axes(ndim, axis, batch_ndim):
    """Axes a fiber kernel reduces or broadcasts over: all but `axis` and the batch dims."""
    return tuple(i for i in range(ndim - batch_ndim) if i != axis)


def sum_fiber(x, y, *, axis, batch_ndim=0, alpha=1.0, beta=0.0):
    """y[j, batch] = alpha*sum of x over all dims but `axis` and the batch dims + beta*y."""
    total = x.sum(axis=_fiber_axes(x.ndim, axis, batch_ndim), dtype=np.float64)
    _store(y, alpha * total, beta, y)


def add_fiber(x, y, z, *, axis, batch_ndim=0, alpha=1.0, beta=0.0):
    """z = alpha*x (broadcast along all dims but `axis` and the batch dims) + beta*y."""
    expanded = np.expand_dims(x, _fiber_axes(y.ndim, axis, batch_ndim))
    _store(z, alpha * expanded, beta, y)


def softmax(x, y, *, axis):
    """y = exp(x - max) / sum(exp(x - max)) along `axis`."""
    shifted = np.exp(x - x.max(axis=axis, keepdims=True))
    y[...] = shifted / shifted.sum(axis=axis, keepdims=True)


def softmax_backward(y, dy, dx, *, axis):
    """dx += y * (dy - sum(y * dy along `axis`)), the backward of y = softmax(x)."""
    dx += y * (dy - (y * dy).sum(axis=axis, keepdims=True))


def maxsumexp(x, y, *, axis):
    """y[0] = max along `axis`, y[1] = sum(exp(x - max)) along `axis`."""
    top = x.max(axis=axis, keepdims=True)
    y[0] = np.squeeze(top, axis=axis)
    y[1] = np.exp(x - top).sum(axis=axis)


# ---------------------------------------------------------------- losses


def cross_entropy(logits, labels, loss, *, alpha=1.0, beta=0.0):
    """loss = alpha*sum_b(logsumexp(logits[:, b]) - logits[labels[b], b]) + beta*loss."""
    wide = logits.astype(np.float64)
    top = wide.max(axis=0)
    lse = top + np.log(np.exp(wide - top).sum(axis=0))
    picked = np.take_along_axis(wide, labels[np.newaxis], axis=0)[0]
    _store(loss, alpha * (lse - picked).sum(), beta, loss)


def cross_entropy_backward(logits, labels, dloss, dlogits, *, alpha=1.0):
    """dlogits += alpha*dloss*(softmax(logits, axis 0) - onehot(labels))."""
    probs = np.empty(logits.shape, np.float64)
    softmax(logits.astype(np.float64), probs, axis=0)
    classes = np.arange(logits.shape[0]).reshape((-1,) + (1,) * labels.ndim)
    dlogits += alpha * dloss[()] * (probs - (classes == labels))


def valid_count(labels, count, *, ignore_index=-100, beta=0.0):
    """count (0-d) = number of labels != ignore_index + beta*count."""
    _store(count, np.count_nonzero(labels != ignore_index), beta, count)


def _check_labels(kernel, labels, valid, num_classes, ignore_index):
    bad = valid & ((labels < 0) | (labels >= num_classes))
    if bad.any():
        raise label_error(kernel, labels[bad].flat[0], num_classes, ignore_index)


def cross_entropy_lse(logits, lse, labels, count, loss, *, ignore_index=-100, num_classes,
                      class_offset=0, beta=0.0):
    """loss = sum over labels != ignore_index of (lse - logits[label]) / count + beta*loss,
    for the class tile of logits starting at class `class_offset`: tile 0 adds the lse
    terms and checks the labels, each tile subtracts the logits of the labels it holds."""
    valid = labels != ignore_index
    if class_offset == 0:
        _check_labels("cross_entropy_lse", labels, valid, num_classes, ignore_index)
    local = labels - class_offset
    hit = valid & (local >= 0) & (local < logits.shape[0])
    picked = np.take_along_axis(logits, np.where(hit, local, 0)[np.newaxis], axis=0)[0]
    total = -np.where(hit, picked, 0).sum(dtype=np.float64)
    if class_offset == 0:
        total += np.where(valid, lse, 0).sum(dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):  # count 0: all ignored, nan
        _store(loss, total / count[()], beta, loss)


def cross_entropy_lse_backward(logits, lse, labels, count, dloss, dlogits, *,
                               ignore_index=-100, num_classes, class_offset=0):
    """dlogits += dloss/count * (exp(logits - lse) - onehot(label)) at labels != ignore_index,
    for the class tile starting at `class_offset`."""
    valid = labels != ignore_index
    if class_offset == 0:
        _check_labels("cross_entropy_lse_backward", labels, valid, num_classes, ignore_index)
    classes = np.arange(class_offset, class_offset + logits.shape[0])
    onehot = classes.reshape((-1,) + (1,) * labels.ndim) == labels
    with np.errstate(invalid="ignore", divide="ignore"):  # count 0: nothing is valid
        scale = np.where(valid, dloss[()] / count[()], 0)
    dlogits += scale * (np.exp(logits - lse) - onehot)


def mse(x, y, loss, *, alpha=1.0, beta=0.0):
    """loss (0-d) = alpha*sum((x - y)^2) + beta*loss."""
    diff = x.astype(np.float64) - y
    _store(loss, alpha * (diff * diff).sum(), beta, loss)


def mse_backward(x, y, dloss, dx, *, alpha=1.0):
    """dx += 2*alpha*dloss*(x - y)."""
    dx += 2.0 * alpha * dloss[()] * (x - y)


# ---------------------------------------------------------------- embedding


def _check_ids(kernel, index, vocab_size):
    """An id outside the whole vocabulary is a user error: a vocab tile alone would skip it."""
    bad = (index < 0) | (index >= vocab_size)
    if bad.any():
        raise vocab_error(kernel, index[bad].flat[0], vocab_size)


def embedding(index, vocab, y, *, axis, vocab_size, vocab_offset=0, beta=0.0):
    """y = beta*y + vocab columns of the in-range indices, the E axis at position `axis`.

    This tile holds columns [vocab_offset, vocab_offset + vocab.shape[1]) of a vocabulary of
    vocab_size: ids of other tiles contribute zeros, ids outside the vocabulary raise.
    """
    _check_ids("embedding", index, vocab_size)
    local = index - vocab_offset
    hit = (local >= 0) & (local < vocab.shape[1])
    rows = np.where(hit, vocab[:, np.where(hit, local, 0)], 0)  # (E,) + index.shape
    _store(y, np.moveaxis(rows, 0, axis), beta, y)


def embedding_backward(index, dy, dvocab, *, axis, vocab_size, vocab_offset=0, beta=0.0):
    """dvocab = beta*dvocab + scatter-add of dy's E-vectors into columns index - vocab_offset;
    ids outside the vocabulary [0, vocab_size) raise."""
    _check_ids("embedding_backward", index, vocab_size)
    local = index - vocab_offset
    hit = (local >= 0) & (local < dvocab.shape[1])
    vectors = np.moveaxis(dy, axis, 0)[:, hit]  # (E, number of hits)
    # (Vt, E): one row per vocab column of the tile.
    rows = np.zeros(dvocab.shape[::-1], _wide(dvocab.dtype))
    np.add.at(rows, local[hit], vectors.T)
    _store(dvocab, rows.T, beta, dvocab)


# ---------------------------------------------------------------- optimizers


def sgd_step(
    step,
    grad,
    param,
    velocity,
    *,
    lr,
    momentum=0.0,
    weight_decay=0.0,
    dampening=0.0,
    nesterov=False,
):
    """PyTorch SGD; `step` (0-d int64) is the 1-based step, velocity is not read at step 1."""
    g = grad + weight_decay * param
    if momentum != 0.0:
        if step[()] == 1:
            velocity[...] = g
        else:
            velocity[...] = momentum * velocity + (1.0 - dampening) * g
        g = g + momentum * velocity if nesterov else velocity
    param -= lr * g


def _adam(step, grad, param, m, v, lr, beta1, beta2, eps, l2, decay):
    """Adam moments and update after param *= decay; m and v are not read at step 1."""
    t = int(step[()])
    g = grad + l2 * param
    param *= decay
    # PyTorch's moments start at zero: at step 1 don't read possibly uninitialized ones.
    if t == 1:
        m[...] = (1.0 - beta1) * g
        v[...] = (1.0 - beta2) * g * g
    else:
        m[...] = beta1 * m + (1.0 - beta1) * g
        v[...] = beta2 * v + (1.0 - beta2) * g * g
    m_hat = m / (1.0 - beta1**t)
    v_hat = v / (1.0 - beta2**t)
    param -= lr * m_hat / (np.sqrt(v_hat) + eps)


def adam_step(step, grad, param, m, v, *, lr, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0):
    """PyTorch Adam with L2 weight decay added to the gradient."""
    _adam(step, grad, param, m, v, lr, beta1, beta2, eps, weight_decay, 1.0)


def adamw_step(step, grad, param, m, v, *, lr, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0):
    """PyTorch AdamW: param *= 1 - lr*weight_decay, then the Adam update without L2."""
    _adam(step, grad, param, m, v, lr, beta1, beta2, eps, 0.0, 1.0 - lr * weight_decay)


KERNELS = {name: MATH_KERNELS[name] if name in MATH_KERNELS else globals()[name]
           for name in KERNEL_NAMES}
