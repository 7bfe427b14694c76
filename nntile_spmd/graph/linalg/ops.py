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
