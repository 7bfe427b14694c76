"""xp-generic kernels of the embedding (the losses and the optimizers are rules, noted
below).

Part of generic.table. Arrays only: never imports nntile_spmd, mpi4py, numpy, numba or
cupy. One CPU-GPU sync point, deliberate: the embedding id check must raise on the host
(the alternative is training on zero vectors); the label checks of the cross-entropies
are their rules' (rules_indexed.run_check).
"""

from .errors import vocab_error
from .generic_common import store, wide

# ---------------------------------------------------------------- losses
# The cross-entropies are rules of formulas/losses.py: cross_entropy_lse_backward an
# indexed one (LOSSES), cross_entropy_lse a picked one; cross_entropy_backward and
# cross_entropy are the table's logsumexp, then a rule of each (FROM_LSE,
# PICKED_FROM_LSE). Not functions here.


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
# SGD, Adam and AdamW are updates of formulas/optimizers.py (UPDATES), not functions here.
