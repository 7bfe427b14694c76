"""Numba embedding lookups of the cpu table: a gather and a scatter-add of E-vectors by
id. The losses are rules of formulas/losses.py, their loops generated: mse and
valid_count reductions, mse_backward a broadcast rule, cross_entropy_lse_backward and
cross_entropy_backward indexed rules, cross_entropy_lse and cross_entropy picked rules.

Arrays only: never imports nntile_spmd, mpi4py or cupy. Multi-dim tiles reach numba
as C-ordered transposed views (cpu_common.folded_t), indexed backwards; fp16 falls back
to the NumPy reference.
"""

from numba import njit

from . import reference
from .cpu_common import F16, folded_t
from .errors import vocab_error
from .layout import fold


# ---------------------------------------------------------------- embedding
# index is folded to (m, k) around `axis` and y to (m, E, k): the E-vector of index
# position (i, p) is y[i, :, p], that is yt[p, :, i] in the transposed views.


@njit(cache=True, nogil=True)
def _embedding(index_t, vocab_t, yt, offset, beta):
    k, m = index_t.shape
    n_local, width = vocab_t.shape  # vocab is (E, Vt)
    c = yt.dtype.type(beta)
    zero = yt.dtype.type(0.0)
    for p in range(k):
        for i in range(m):
            column = index_t[p, i] - offset
            hit = 0 <= column < n_local  # other vocab tiles supply the rest
            for e in range(width):
                value = vocab_t[column, e] if hit else zero
                yt[p, e, i] = value if beta == 0.0 else value + c * yt[p, e, i]


@njit(cache=True, nogil=True)
def _embedding_backward(index_t, dy_t, dvocab_t, offset, beta):
    k, m = index_t.shape
    n_local, width = dvocab_t.shape
    c = dvocab_t.dtype.type(beta)
    for column in range(n_local):
        for e in range(width):
            # beta == 0: don't read dvocab, it may be uninitialized.
            dvocab_t[column, e] = 0.0 if beta == 0.0 else c * dvocab_t[column, e]
    for p in range(k):
        for i in range(m):
            column = index_t[p, i] - offset
            if 0 <= column < n_local:
                for e in range(width):
                    dvocab_t[column, e] += dy_t[p, e, i]


@njit(cache=True, nogil=True)
def _first_bad_id(index, vocab_size):
    """Position of the first id outside [0, vocab_size), or -1 (numba cannot format it)."""
    for i in range(index.size):
        if index[i] < 0 or index[i] >= vocab_size:
            return i
    return -1


def _check_ids(kernel, index, vocab_size):
    """An id outside the whole vocabulary is a user error: a vocab tile alone would skip it."""
    flat = index.ravel("K")
    position = _first_bad_id(flat, int(vocab_size))
    if position >= 0:
        raise vocab_error(kernel, flat[position], vocab_size)


def _embedding_views(index, vectors, axis):
    """Transposed views of index as (m, k) around `axis` and of the E-vector tile as (m, E, k)."""
    m, k = fold(index.shape, (axis,))
    return folded_t(index, (m, k)), folded_t(vectors, (m, vectors.shape[axis], k))


def embedding(index, vocab, y, *, axis, vocab_size, vocab_offset=0, beta=0.0):
    """y = beta*y + vocab columns of the in-range indices, the E axis at position `axis`;
    ids outside the vocabulary [0, vocab_size) raise."""
    if vocab.dtype is F16:
        return reference.embedding(index, vocab, y, axis=axis, vocab_size=vocab_size,
                                   vocab_offset=vocab_offset, beta=beta)
    _check_ids("embedding", index, vocab_size)
    index_t, yt = _embedding_views(index, y, axis)
    _embedding(index_t, folded_t(vocab, vocab.shape), yt, int(vocab_offset), float(beta))


def embedding_backward(index, dy, dvocab, *, axis, vocab_size, vocab_offset=0, beta=0.0):
    """dvocab = beta*dvocab + scatter-add of dy's E-vectors into columns index - vocab_offset;
    ids outside the vocabulary [0, vocab_size) raise."""
    if dvocab.dtype is F16:
        return reference.embedding_backward(index, dy, dvocab, axis=axis, vocab_size=vocab_size,
                                            vocab_offset=vocab_offset, beta=beta)
    _check_ids("embedding_backward", index, vocab_size)
    index_t, dy_t = _embedding_views(index, dy, axis)
    dvocab_t = folded_t(dvocab, dvocab.shape)
    _embedding_backward(index_t, dy_t, dvocab_t, int(vocab_offset), float(beta))
