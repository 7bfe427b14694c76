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
CP_LAYOUTS = ("contiguous", "zigzag")


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


def check_sequence_tiles(tiling, axis_class, cp, layout, where):
    """Every cp rank holds a block of the sequence axis (zigzag: one from each half)."""
    need = cp if layout == "contiguous" else 2 * cp
    held = "a block" if layout == "contiguous" else "two blocks (one from each half)"
    if axis_class.size < need:
        raise ValueError(f"{where}: cp={cp} ({layout}) gives every cp rank {held} of the "
                         f"sequence axis, {need} in all, but the sequence has only "
                         f"{axis_class.size} position(s)")
    if tiling.num_tiles < need:
        raise ValueError(f"{where}: cp={cp} ({layout}) needs at least {need} tiles of the "
                         f"sequence axis (size {axis_class.size}) so that every cp rank "
                         f"holds {held} of it, but the tiling cuts it into "
                         f"{tiling.num_tiles} tile(s) (boundaries {list(tiling.boundaries)});"
                         f" use sequence tiles of at most {axis_class.size // need} or a "
                         "smaller cp")


def check_layout(mesh):
    """A mesh's cp_layout is one of CP_LAYOUTS, and other than the default only with cp."""
    names = [name for name, _ in mesh.axes]
    if mesh.cp_layout not in CP_LAYOUTS or (mesh.cp_layout != "contiguous" and
                                            "cp" not in names):
        raise ValueError(f"distribution mesh {mesh.describe()}: cp_layout "
                         f"{mesh.cp_layout!r} needs one of {CP_LAYOUTS} and a cp axis")
