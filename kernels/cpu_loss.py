"""Numba losses (cross-entropy, MSE) and embedding lookups of the cpu table.

Arrays only: never imports nntile_spmd, mpi4py or cupy. Loss sums accumulate in
float64; fp16 falls back to the NumPy reference.
"""

import math

import numpy as np
from numba import njit

from . import reference
from .cpu_fp16 import F16
from .layout import fold


@njit(cache=True)
def _column_max_logsum(logits, b):
    """(max, log(sum(exp(logits[:, b] - max)))) of one column."""
    top = -np.inf
    for c in range(logits.shape[0]):
        top = max(top, logits[c, b])
    total = 0.0
    for c in range(logits.shape[0]):
        total += math.exp(logits[c, b] - top)
    return top, math.log(total)


@njit(cache=True)
def _check_label(label, n_classes):
    # numba does no bounds checks: a bad label would read or write outside the tile.
    if label < 0 or label >= n_classes:
        raise IndexError("cross_entropy: label out of range of the class axis")


@njit(cache=True)
def _cross_entropy(logits, labels, loss, alpha, beta):
    n_classes, batch = logits.shape
    total = 0.0
    for b in range(batch):
        _check_label(labels[b], n_classes)
        top, log_total = _column_max_logsum(logits, b)
        total += top + log_total - logits[labels[b], b]
    loss[0] = alpha * total if beta == 0.0 else alpha * total + beta * loss[0]


@njit(cache=True)
def _cross_entropy_backward(logits, labels, dloss, dlogits, alpha):
    n_classes, batch = logits.shape
    scale = alpha * dloss[0]
    for b in range(batch):
        label = labels[b]
        _check_label(label, n_classes)
        top, log_total = _column_max_logsum(logits, b)
        for c in range(n_classes):
            prob = math.exp(logits[c, b] - top - log_total)
            dlogits[c, b] += scale * (prob - 1.0 if c == label else prob)


@njit(cache=True)
def _mse(x, y, loss, alpha, beta):
    total = 0.0
    for i in range(x.size):
        diff = float(x[i]) - float(y[i])
        total += diff * diff
    loss[0] = alpha * total if beta == 0.0 else alpha * total + beta * loss[0]


@njit(cache=True)
def _mse_backward(x, y, dloss, dx, alpha):
    scale = dx.dtype.type(2.0 * alpha * dloss[0])
    for i in range(x.size):
        dx[i] += scale * (x[i] - y[i])


def _columns(logits, labels):
    """logits as (classes, batch) and labels as a flat (batch,) view."""
    return logits.reshape((logits.shape[0], labels.size), order="F"), labels.ravel("K")


def cross_entropy(logits, labels, loss, *, alpha=1.0, beta=0.0):
    """loss = alpha*sum_b(logsumexp(logits[:, b]) - logits[labels[b], b]) + beta*loss."""
    if logits.dtype is F16:
        return reference.cross_entropy(logits, labels, loss, alpha=alpha, beta=beta)
    _cross_entropy(*_columns(logits, labels), loss.ravel("K"), float(alpha), float(beta))


def cross_entropy_backward(logits, labels, dloss, dlogits, *, alpha=1.0):
    """dlogits += alpha*dloss*(softmax(logits, axis 0) - onehot(labels))."""
    if logits.dtype is F16:
        return reference.cross_entropy_backward(logits, labels, dloss, dlogits, alpha=alpha)
    logits2, labels1 = _columns(logits, labels)
    _cross_entropy_backward(
        logits2, labels1, dloss.ravel("K"), dlogits.reshape(logits2.shape, order="F"), float(alpha)
    )


def mse(x, y, loss, *, alpha=1.0, beta=0.0):
    """loss (0-d) = alpha*sum((x - y)^2) + beta*loss."""
    if x.dtype is F16:
        return reference.mse(x, y, loss, alpha=alpha, beta=beta)
    _mse(x.ravel("K"), y.ravel("K"), loss.ravel("K"), float(alpha), float(beta))


def mse_backward(x, y, dloss, dx, *, alpha=1.0):
    """dx += 2*alpha*dloss*(x - y)."""
    if x.dtype is F16:
        return reference.mse_backward(x, y, dloss, dx, alpha=alpha)
    _mse_backward(x.ravel("K"), y.ravel("K"), dloss.ravel("K"), dx.ravel("K"), float(alpha))


# ---------------------------------------------------------------- embedding
# index is folded to (m, k) around `axis` and y to (m, E, k): the E-vector of index
# position (i, p) is y[i, :, p].


@njit(cache=True)
def _embedding(index, vocab, y, offset, beta):
    m, k = index.shape
    width, n_local = vocab.shape
    c = y.dtype.type(beta)
    zero = y.dtype.type(0.0)
    for p in range(k):
        for i in range(m):
            column = index[i, p] - offset
            hit = 0 <= column < n_local  # other vocab tiles supply the rest
            for e in range(width):
                value = vocab[e, column] if hit else zero
                y[i, e, p] = value if beta == 0.0 else value + c * y[i, e, p]


@njit(cache=True)
def _embedding_backward(index, dy, dvocab, offset, beta):
    m, k = index.shape
    width, n_local = dvocab.shape
    c = dvocab.dtype.type(beta)
    for column in range(n_local):
        for e in range(width):
            # beta == 0: don't read dvocab, it may be uninitialized.
            dvocab[e, column] = 0.0 if beta == 0.0 else c * dvocab[e, column]
    for p in range(k):
        for i in range(m):
            column = index[i, p] - offset
            if 0 <= column < n_local:
                for e in range(width):
                    dvocab[e, column] += dy[i, e, p]


def _embedding_views(index, vectors, axis):
    """index as (m, k) around `axis` and the E-vector tile as (m, E, k)."""
    m, k = fold(index.shape, (axis,))
    return index.reshape((m, k), order="F"), vectors.reshape((m, vectors.shape[axis], k), order="F")


def embedding(index, vocab, y, *, axis, vocab_offset=0, beta=0.0):
    """y = beta*y + vocab columns of the in-range indices, the E axis at position `axis`."""
    if vocab.dtype is F16:
        return reference.embedding(index, vocab, y, axis=axis, vocab_offset=vocab_offset, beta=beta)
    index2, y3 = _embedding_views(index, y, axis)
    _embedding(index2, vocab, y3, int(vocab_offset), float(beta))


def embedding_backward(index, dy, dvocab, *, axis, vocab_offset=0, beta=0.0):
    """dvocab = beta*dvocab + scatter-add of dy's E-vectors into columns index - vocab_offset."""
    if dvocab.dtype is F16:
        return reference.embedding_backward(
            index, dy, dvocab, axis=axis, vocab_offset=vocab_offset, beta=beta
        )
    index2, dy3 = _embedding_views(index, dy, axis)
    _embedding_backward(index2, dy3, dvocab, int(vocab_offset), float(beta))
