"""Graph layer: registry entries and backward rules of mask_scalar and mask_causal
(the attention composites are made of other families' ops).
"""

from __future__ import annotations

from .. import ops
from ..checks import elementwise_axes, elementwise_flops, require_float
from ..registry import REQUIRED, OpSpec, add_entries, labels, op_error

ENTRIES: list[OpSpec] = []   # the family's registry entries, in writing order
add_spec = ENTRIES.append   # each add_spec(OpSpec(...)) below joins ENTRIES


def mask_scalar_rule(op, ctx):
    """Zero the masked entries of grad(A), in place.

    mask_scalar works in place and gradients are keyed by tensor name, so ctx.grad(A)
    stands both for d/d(A after masking) and d/d(A before masking). Rules run in
    reverse program order: when this one runs, every reader of the masked A has
    already accumulated into ctx.grad(A), and the op that produced A before masking
    runs its rule afterwards and reads ctx.grad(A). The masked entries were
    overwritten by val and no longer depend on the old A, the kept ones are passed
    through unchanged, so zeroing the masked entries turns the first gradient into
    exactly the second.
    """
    mask, a = op.inputs
    if ctx.needs(a):
        ops.mask_scalar(mask, 0.0, ctx.grad(a), op.attrs["batch_ndim"])


def mask_causal_rule(op, ctx):
    """Zero the masked entries of grad(A), in place (as mask_scalar_rule, same reasons)."""
    (a,) = op.inputs
    if ctx.needs(a):
        ops.mask_causal(0.0, ctx.grad(a))


# -- mask_scalar: A = val where mask is False, in place ---------------------------------
def mask_scalar_infer(op, attrs, inputs):
    mask, a = inputs
    batch_ndim = attrs["batch_ndim"]
    if not isinstance(batch_ndim, int) or not 0 <= batch_ndim <= a.ndim:
        raise op_error(op, f"batch_ndim={batch_ndim!r} out of range for {a.ndim} dims", inputs)
    if mask.dtype != "bool":
        raise op_error(op, f"{mask.name} must be a bool tensor", inputs, TypeError)
    require_float(op, a)
    expected = a.shape[:a.ndim - batch_ndim]
    if mask.shape != expected:
        raise op_error(op, f"{mask.name} must have shape {list(expected)} (the leading "
                       f"dims of {a.name} before its {batch_ndim} batch dims)", inputs)
    return [(a.shape, a.dtype)]


def mask_scalar_axes(attrs, in_shapes, out_shapes):
    """The mask's axes are A's leading axes: its tiles follow A's tiling."""
    a = labels("d", len(in_shapes[1]))
    return a[:len(a) - attrs["batch_ndim"]], a, a


# inputs (mask, A), output A itself: the kernel is y = where(mask, x, val) on aliased x, y
add_spec(OpSpec(name="mask_scalar", kernel="mask_scalar", num_inputs=2, num_outputs=1,
                infer=mask_scalar_infer, axes=mask_scalar_axes,
                attrs={"val": REQUIRED, "batch_ndim": 0}, flops=elementwise_flops(1),
                backward=mask_scalar_rule, in_place=(1,)))


# -- mask_causal: A[key, query, batch...] = val where key > query, in place ---------------
def mask_causal_infer(op, attrs, inputs):
    (a,) = inputs
    require_float(op, a)
    if a.ndim < 2:
        raise op_error(op, f"{a.name} must be [keys, queries, batch...]", inputs)
    return [(a.shape, a.dtype)]


def crosses_diagonal(attrs, offsets, shapes, whole_shapes):
    """Only a tile with some key index > some query index has entries to mask."""
    (key_start, query_start), (key_size, _) = offsets[0][:2], shapes[0][:2]
    return key_start + key_size - 1 > query_start


add_spec(OpSpec(name="mask_causal", kernel="mask_causal", num_inputs=1, num_outputs=1,
                infer=mask_causal_infer, axes=elementwise_axes, attrs={"val": REQUIRED},
                flops=elementwise_flops(1), step_needed=crosses_diagonal,
                tile_params=lambda attrs, offsets: {"key_offset": offsets[0][0],
                                                    "query_offset": offsets[0][1]},
                backward=mask_causal_rule, in_place=(0,)))


def register(registry: dict) -> None:
    """Add the attention entries to `registry` (graph/families.py calls it)."""
    add_entries(registry, ENTRIES)

