"""xp-generic kernels of the slice ops: a tensor x and its slices along `axis` (x's
shape with that axis removed). The sums along an axis (sum_slice, sumprod_slice) are
reduction rules (ArrayReduction evaluates them), the log-space reductions (logsumexp,
maxsumexp, softmax) softmax-family rules (ArrayExpReduction), logsumexp_merge an
elementwise rule, the ops that broadcast a slice back broadcast rules (ArrayBroadcast),
all of formulas/reductions.py, and the masks indexed rules of formulas/attention.py
(ArrayIndexed); add_slice's body here is the cuda table's entry only (cuda.py).

Part of generic.table. Arrays only: never imports nntile_spmd, mpi4py, numba or cupy.
Nothing here synchronizes a CuPy stream.
"""

from .generic_common import store


def add_slice(xp, s, x, z, *, axis, alpha=1.0, beta=1.0):
    """z = alpha * s (broadcast along `axis`) + beta*x (x is not read when beta == 0).

    The cuda table's add_slice: CuPy's fused store is one launch where the rule's array
    expressions (ArrayBroadcast, the reference's add_slice) make three; same numerics."""
    store(z, xp.expand_dims(s, axis), beta, x, alpha)


