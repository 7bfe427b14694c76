"""xp-generic kernels of the cross-entropies and the embedding (the optimizers are
rules.py's; mse and valid_count reductions of rules_reduce.py, mse_backward a broadcast
rule of rules_broadcast.py, cross_entropy_lse_backward and cross_entropy_backward
indexed rules of rules_indexed.py).

Part of generic.table. Arrays only: never imports nntile_spmd, mpi4py, numba or cupy
(NumPy only for errstate, which CuPy arrays ignore). Two CPU-GPU sync points, both
deliberate: the label checks of the cross-entropies and the embedding id check must
raise on the host (the alternative is training on zero vectors, or on the class a
wrapped index picks: CuPy's take_along_axis wraps where NumPy raises).
"""

import numpy as np

from .errors import label_error, vocab_error
from .generic_common import store, wide

# ---------------------------------------------------------------- losses


def cross_entropy(xp, logits, labels, loss, *, alpha=1.0, beta=0.0):
    """loss = alpha*sum_b(logsumexp(logits[:, b]) - logits[labels[b], b]) + beta*loss."""
    _check_labels("cross_entropy", labels, True, logits.shape[0], None)
    carried = logits.astype(xp.float64)
    top = carried.max(axis=0)
    lse = top + xp.log(xp.exp(carried - top).sum(axis=0))
    picked = xp.take_along_axis(carried, labels[None], axis=0)[0]
    store(loss, (lse - picked).sum(), beta, loss, alpha)


# cross_entropy_backward is the table's logsumexp and a rule of rules_indexed.py
# (FROM_LSE), not a function here.


def _check_labels(kernel, labels, valid, num_classes, ignore_index):
    # A CPU-GPU sync point: raising needs the verdict on the host. The lse kernels call
    # it on class tile 0 only, once per batch tile (every position meets class tile 0
    # exactly once); `valid`: True, or where labels are not ignore_index.
    bad = valid & ((labels < 0) | (labels >= num_classes))
    if bool(bad.any()):
        raise label_error(kernel, labels[bad].ravel()[0], num_classes, ignore_index)


def cross_entropy_lse(xp, logits, lse, labels, count, loss, *, ignore_index=-100, num_classes,
                      class_offset=0, beta=0.0):
    """loss = sum over labels != ignore_index of (lse - logits[label]) / count + beta*loss,
    for the class tile of logits starting at class `class_offset`: tile 0 adds the lse
    terms and checks the labels, each tile subtracts the logits of the labels it holds."""
    valid = labels != ignore_index
    if class_offset == 0:
        _check_labels("cross_entropy_lse", labels, valid, num_classes, ignore_index)
    local = labels - class_offset
    hit = valid & (local >= 0) & (local < logits.shape[0])
    picked = xp.take_along_axis(logits, xp.where(hit, local, 0)[None], axis=0)[0]
    total = -xp.where(hit, picked, 0).sum(dtype=xp.float64)
    if class_offset == 0:
        total = total + xp.where(valid, lse, 0).sum(dtype=xp.float64)
    with np.errstate(invalid="ignore", divide="ignore"):  # count 0: all ignored, nan
        store(loss, total / count, beta, loss)


# cross_entropy_lse_backward is a rule of rules_indexed.py (LOSSES), not a function here.


# ---------------------------------------------------------------- embedding
# Ids of other vocab tiles are masked with where() rather than boolean indexing, which
# would need the hit count on the host (a CuPy stream synchronization).


def _check_ids(kernel, index, vocab_size):
    """An id outside the whole vocabulary is a user error: a vocab tile alone would skip it."""
    bad = (index < 0) | (index >= vocab_size)
    if bool(bad.any()):  # host sync, once per index tile
        raise vocab_error(kernel, index[bad].ravel()[0], vocab_size)


def embedding(xp, index, vocab, y, *, axis, vocab_size, vocab_offset=0, beta=0.0):
    """y = beta*y + vocab columns of the in-range indices, the E axis at position `axis`.

    This tile holds columns [vocab_offset, vocab_offset + vocab.shape[1]) of a vocabulary of
    vocab_size: ids of other tiles contribute zeros, ids outside the vocabulary raise.
    """
    _check_ids("embedding", index, vocab_size)
    local = index - vocab_offset
    hit = (local >= 0) & (local < vocab.shape[1])
    rows = xp.where(hit, vocab[:, xp.where(hit, local, 0)], 0)  # (E,) + index.shape
    store(y, xp.moveaxis(rows, 0, axis), beta, y)


def embedding_backward(xp, index, dy, dvocab, *, axis, vocab_size, vocab_offset=0, beta=0.0):
    """dvocab = beta*dvocab + scatter-add of dy's E-vectors into columns index - vocab_offset;
    ids outside the vocabulary [0, vocab_size) raise."""
    _check_ids("embedding_backward", index, vocab_size)
    local = index - vocab_offset
    hit = (local >= 0) & (local < dvocab.shape[1])
    # (E,) + index.shape with the misses zeroed, and (Vt, E): one row per vocab column.
    vectors = xp.where(hit, xp.moveaxis(dy, axis, 0), 0)
    rows = xp.zeros(dvocab.shape[::-1], wide(xp, dvocab.dtype))
    # Misses add zeros into row 0; both flattenings below are C order, so they pair up.
    xp.add.at(rows, xp.where(hit, local, 0).ravel(), vectors.reshape(dvocab.shape[0], -1).T)
    store(dvocab, rows.T, beta, dvocab)


# ---------------------------------------------------------------- optimizers
# SGD, Adam and AdamW are updates of rules.py (UPDATES), not functions here.
