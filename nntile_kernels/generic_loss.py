"""xp-generic kernels of the cross-entropies and the embedding (the optimizers are
rules.py's; mse and valid_count reductions of rules_reduce.py, mse_backward a broadcast
rule of rules_broadcast.py, cross_entropy_lse_backward and cross_entropy_backward
indexed rules of rules_indexed.py, cross_entropy_lse a picked rule of rules_picked.py).

Part of generic.table. Arrays only: never imports nntile_spmd, mpi4py, numpy, numba or
cupy. Two CPU-GPU sync points, both deliberate: the label check of cross_entropy (the
rules' checks are rules_indexed.run_check) and the embedding id check must raise on the
host (the alternative is training on zero vectors, or on the class a
wrapped index picks: CuPy's take_along_axis wraps where NumPy raises).
"""

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
    # A CPU-GPU sync point: raising needs the verdict on the host; `valid`: True, or
    # where labels are not ignore_index.
    bad = valid & ((labels < 0) | (labels >= num_classes))
    if bool(bad.any()):
        raise label_error(kernel, labels[bad].ravel()[0], num_classes, ignore_index)


# cross_entropy_lse is a rule of rules_picked.py, cross_entropy_lse_backward one of
# rules_indexed.py (LOSSES): not functions here.


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
