"""xp-generic kernels of the slice ops: a tensor x and its slices along `axis` (x's
shape with that axis removed). The sums along an axis (sum_slice, sumprod_slice) are
rules of rules_reduce.py (ArrayReduction evaluates them), the log-space reductions
(logsumexp, maxsumexp, softmax) rules of rules_softmax.py (ArrayExpReduction),
logsumexp_merge a rule of rules.py, the ops that broadcast a slice back formulas of
rules_broadcast.py (ArrayBroadcast), the masks rules of rules_indexed.py
(ArrayIndexed); add_slice's body here is the cuda table's entry only (cuda.py).

Part of generic.table. Arrays only: never imports nntile_spmd, mpi4py, numba or cupy.
Nothing here synchronizes a CuPy stream.
"""

from .generic_common import store


def add_slice(xp, s, x, z, *, axis, alpha=1.0, beta=1.0):
    """z = alpha * s (broadcast along `axis`) + beta*x (x is not read when beta == 0).

    The cuda table's add_slice: CuPy's fused store is one launch where the rule's array
    expressions (rules_broadcast.py, the reference's add_slice) make three; same numerics."""
    store(z, xp.expand_dims(s, axis), beta, x, alpha)


