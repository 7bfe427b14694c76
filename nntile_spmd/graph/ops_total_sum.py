"""Graph layer: total_sum_accum (seed 000), NNTile's accumulation of the cross-entropy
sum, re-exported by `nntile_spmd.ops`.

val += alpha * sum over labels != ignore_index of (logsumexp - src[label]) is
cross_entropy_lse with count = 1/alpha accumulating into val (beta = 1), so it reuses
that op's kernels and its tiling: the class axis may be split over tiles and ranks.
"""

from __future__ import annotations

import numbers

from .apply import apply
from .dtypes import FLOAT_DTYPES
from .registry import op_error
from .tensor import TensorNode


def total_sum_accum(alpha, logsumexp, src, class_labels, val, ignore_index=-100):
    """val += alpha * sum over labels != ignore_index of (logsumexp - src[label, ...])
    (NNTile's total_sum_accum): src [classes, batch...], logsumexp and class_labels
    [batch...], val an existing 0-d tensor. Shape mistakes are reported by the
    cross_entropy_lse op it adds."""
    check_total_sum_accum(alpha, src, val)
    graph = val.graph
    name, index = f"{val.name}_inverse_alpha", 1
    while graph.has_tensor(name):   # one constant per call: the graph may hold several
        name, index = f"{val.name}_inverse_alpha{index}", index + 1
    inverse = graph.tensor([], name, val.dtype)
    apply("fill", [], [inverse], value=1.0 / alpha)
    return apply("cross_entropy_lse", [src, logsumexp, class_labels, inverse], [val],
                 ignore_index=ignore_index, beta=1.0)


def check_total_sum_accum(alpha, src, val):
    """total_sum_accum's own mistakes raise before any op is added."""
    if not isinstance(val, TensorNode):
        raise op_error("total_sum_accum", f"val must be an existing 0-d tensor, not {val!r}",
                       (src,), TypeError)
    tensors = (src, val)
    if val.shape != () or val.dtype not in FLOAT_DTYPES:
        raise op_error("total_sum_accum", f"{val.name} must be a 0-d floating-point tensor",
                       tensors)
    if not isinstance(alpha, numbers.Real) or alpha == 0:
        raise op_error("total_sum_accum", f"alpha={alpha!r} must be a nonzero real number",
                       tensors)
