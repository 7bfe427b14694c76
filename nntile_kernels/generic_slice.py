"""xp-generic kernels of the slice ops: a tensor x and its slices along `axis` (x's
shape with that axis removed): the masks. The sums along an axis (sum_slice,
sumprod_slice) are rules of rules_reduce.py (ArrayReduction evaluates them), the
log-space reductions (logsumexp, maxsumexp, softmax) rules of rules_softmax.py
(ArrayExpReduction), logsumexp_merge a rule of rules.py, the ops that broadcast a slice
back formulas of rules_broadcast.py (ArrayBroadcast); add_slice's body here is the cuda
table's entry only (cuda.py).

Part of generic.table. Arrays only: never imports nntile_spmd, mpi4py, numba or cupy.
Nothing here synchronizes a CuPy stream.
"""

from .generic_common import store


def add_slice(xp, s, x, z, *, axis, alpha=1.0, beta=1.0):
    """z = alpha * s (broadcast along `axis`) + beta*x (x is not read when beta == 0).

    The cuda table's add_slice: CuPy's fused store is one launch where the rule's array
    expressions (rules_broadcast.py, the reference's add_slice) make three; same numerics."""
    store(z, xp.expand_dims(s, axis), beta, x, alpha)


def mask_scalar(xp, mask, x, y, *, val, batch_ndim=0):
    """y = x where mask, else val; the bool mask has x's leading dims and is broadcast
    over its `batch_ndim` trailing dims (y may be x itself: NNTile's in-place form)."""
    y[...] = xp.where(mask.reshape(mask.shape + (1,) * batch_ndim), x, val)


def mask_causal(xp, x, y, *, val, key_offset=0, query_offset=0):
    """y = val where the key index (dim 0, from key_offset) exceeds the query index (dim 1,
    from query_offset), else x; trailing dims are batch (y may be x itself: in place)."""
    keys = xp.arange(key_offset, key_offset + x.shape[0])[:, None]
    queries = xp.arange(query_offset, query_offset + x.shape[1])[None, :]
    masked = (keys > queries).reshape(x.shape[:2] + (1,) * (x.ndim - 2))
    y[...] = xp.where(masked, val, x)
