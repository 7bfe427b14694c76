"""Graph layer: builders of gemm and transpose, re-exported by `nntile_spmd.ops`.
"""

from __future__ import annotations

from ..apply import apply


# -- matrix ops ----------------------------------------------------------------
def gemm(a, b, c_or_name, alpha=1.0, beta=0.0, trans_a=False, trans_b=False, ndim=1,
         batch_ndim=0):
    """C = alpha*op(A)op(B) (new tensor named c_or_name) or, given C, + beta*C."""
    return apply("gemm", [a, b], [c_or_name], alpha=alpha, beta=beta, trans_a=trans_a,
                 trans_b=trans_b, ndim=ndim, batch_ndim=batch_ndim)


def transpose(x, name, alpha=1.0, ndim=1):
    """y = alpha * x with its first `ndim` dims moved to the end."""
    return apply("transpose", [x], [name], alpha=alpha, ndim=ndim)


def permute(x, name, perm, alpha=1.0):
    """y = alpha * x with its dims permuted: y's dim i is x's dim perm[i] (NumPy's
    transpose(x, perm)). A rotation (some leading dims moved to the end) is the cyclic
    transpose op, whose CPU kernel is blocked for the cache."""
    perm = tuple(perm) if isinstance(perm, (list, tuple)) else perm
    rotation = rotation_of(perm)
    if rotation is not None and len(perm) == x.ndim:
        return transpose(x, name, alpha, rotation)
    return apply("permute", [x], [name], alpha=alpha, perm=perm)


def rotation_of(perm):
    """k where perm is (k, k + 1, ..., n - 1, 0, ..., k - 1) (1 <= k < n), else None."""
    if not isinstance(perm, tuple) or len(perm) < 2 or \
            any(isinstance(d, bool) or not isinstance(d, int) for d in perm):
        return None
    k, n = perm[0], len(perm)
    return k if 0 < k < n and perm == tuple((k + i) % n for i in range(n)) else None
