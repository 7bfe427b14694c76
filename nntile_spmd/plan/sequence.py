"""Plan layer: the sequence axis that context parallelism (a mesh's "cp" axis) splits.

Attention's scores and probabilities are [key, query, batch...]: keys and queries are
positions of one sequence, so their two dims fall in one axis class. That is how the
sequence axis is found in any graph, with no mark on the model: the axis class that
some activation has on two dims (the causal block-sparse ones first, then any other,
such as a bool mask's [key, query]). Parameters, their gradients and optimizer state
are not asked: a square weight [n, n] of a residual stream also has one axis twice.

Under cp, a tensor with the sequence axis is blocked along its *last* sequence dim:
the query dim of [key, query] tensors, so every score, probability and their
gradients are computed by the rank that owns the query block (owner computes), and the
key/value tiles of the other cp ranks travel to it (docs/context_parallel.md).
"""

from __future__ import annotations

from collections import Counter

UNASKED_ROLES = ("parameter", "gradient", "state")


def sequence_class(graph, class_of, where):
    """The axis class of attention's key and query (see the module docstring); an
    error naming `where` when the graph has no such axis."""
    causal, other = Counter(), Counter()
    for tensor in graph.tensors():
        dims = [class_of[(tensor.name, d)] for d in range(tensor.ndim)]
        if tensor.causal_dims is not None:
            causal[dims[tensor.causal_dims[0]]] += 1
        if tensor.role not in UNASKED_ROLES:
            other.update({c for c in dims if dims.count(c) > 1})
    for votes in (causal, other):
        if votes:
            return min(votes, key=lambda c: (-votes[c], c))
    raise ValueError(f"{where}: cp splits the sequence axis, which attention's "
                     f"[key, query] scores carry on two dims; graph {graph.name!r} has no "
                     "attention (no activation with one axis on two dims)")


def check_sequence_tiles(tiling, axis_class, cp, where):
    """A cp degree needs at least one sequence tile per cp rank."""
    if axis_class.size < cp:
        raise ValueError(f"{where}: cp={cp} splits the sequence axis over {cp} ranks, but "
                         f"the sequence has only {axis_class.size} position(s)")
    if tiling.num_tiles < cp:
        raise ValueError(f"{where}: cp={cp} needs at least {cp} tiles of the sequence "
                         f"axis (size {axis_class.size}) so that every cp rank holds a "
                         f"block of it, but the tiling cuts it into {tiling.num_tiles} "
                         f"tile(s) (boundaries {list(tiling.boundaries)}); use sequence "
                         f"tiles of at most {axis_class.size // cp} or a smaller cp")
