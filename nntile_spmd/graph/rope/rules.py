"""Graph layer: registry entries and backward rules of rope and scale_slice.

rope follows NNTile: sin and cos are [head_dim/2, rest...], src is
[head_dim, rest..., broadcast...]; the pair (src[2i], src[2i+1]) is rotated by the angle
whose sine and cosine are sin[i], cos[i]. A pair must sit in one tile and a table tile
must be half of a src tile along dim 0, so dim 0 of every operand stays whole (head_dim
is small); every other dim may be split like an elementwise axis.
"""

from __future__ import annotations

from .. import ops
from ..checks import numel, require_axis, require_float, require_same_dtype
from ..reductions.ops import sum_slice
from ..reductions.slice_rules import slice_of
from ..registry import REQUIRED, OpSpec, add_entries, always, labels, op_error

ENTRIES: list[OpSpec] = []   # the family's registry entries, in writing order
add_spec = ENTRIES.append   # each add_spec(OpSpec(...)) below joins ENTRIES


def rope_rule(op, ctx):
    sin, cos, src = op.inputs
    for table in (sin, cos):
        if ctx.needs(table):   # the tables are position constants in every model here
            raise NotImplementedError(f"grad: {op.name} has no gradient for its table "
                                      f"{table.name}; make it a constant input")
    if ctx.needs(src):
        ops.rope_backward(sin, cos, ctx.grad(op.outputs[0]), ctx.grad(src))


def scale_slice_rule(op, ctx):
    (src,) = op.inputs
    if ctx.needs(src):   # each src element fed `size` outputs: their gradients add up
        sum_slice(ctx.grad(op.outputs[0]), ctx.grad(src), op.attrs["axis"],
                  alpha=op.attrs["alpha"], beta=1.0)


def rope_infer(op, attrs, inputs):
    sin, cos, src = inputs
    require_float(op, *inputs)
    require_same_dtype(op, *inputs)
    if sin.shape != cos.shape:
        raise op_error(op, f"{sin.name} and {cos.name} must have the same shape", inputs)
    if sin.ndim < 1 or src.ndim < sin.ndim:
        raise op_error(op, f"{src.name} must have at least the {sin.ndim} dims of the "
                       f"tables and the tables at least one", inputs)
    half = sin.shape[0]
    if isinstance(half, int) and src.shape[0] != 2 * half:
        raise op_error(op, f"{src.name} dim 0 must be twice the tables' dim 0 "
                       f"(2 * {half}: rotated pairs)", inputs)
    if src.shape[1:sin.ndim] != sin.shape[1:]:
        raise op_error(op, f"{src.name} dims 1..{sin.ndim - 1} must equal the tables' "
                       f"dims {list(sin.shape[1:])}", inputs)
    return [(src.shape, src.dtype)]


def rope_axes(attrs, in_shapes, out_shapes):
    """Tables ("half", d1, ...) and src/dst ("pairs", d1, ..., dn)."""
    table, full = len(in_shapes[0]), len(in_shapes[2])
    rest = labels("d", full)[1:]
    tables = ("half",) + rest[:table - 1]
    return (tables, tables, ("pairs",) + rest, ("pairs",) + rest)


def rope_whole(attrs, axes):
    return frozenset({"half", "pairs"})


def rope_flops(attrs, in_shapes, out_shapes):
    return 3 * numel(out_shapes[0])   # per pair: 4 products and 2 sums


# dst = the rotated src (a new tensor)
add_spec(OpSpec(name="rope", kernel="rope", num_inputs=3, num_outputs=1, infer=rope_infer,
                axes=rope_axes, whole=rope_whole, flops=rope_flops, backward=rope_rule))

# dx += the inverse rotation of dy: rope is orthogonal, so its transpose is its inverse
add_spec(OpSpec(name="rope_backward", kernel="rope_backward", num_inputs=3, num_outputs=1,
                infer=rope_infer, axes=rope_axes, whole=rope_whole, flops=rope_flops,
                reads_output=always, differentiable=False))


def scale_slice_infer(op, attrs, inputs):
    """dst is src with a dim of length `size` inserted at `axis`."""
    (src,) = inputs
    require_float(op, src)
    axis, size = attrs["axis"], attrs["size"]
    require_axis(op, axis, src.ndim + 1, inputs)
    if not isinstance(size, int) or size < 1:
        raise op_error(op, f"size={size!r} (the broadcast axis' length) must be an int >= 1",
                       inputs)
    return [(tuple(src.shape[:axis]) + (size,) + tuple(src.shape[axis:]), src.dtype)]


def scale_slice_axes(attrs, in_shapes, out_shapes):
    full = labels("d", len(out_shapes[0]))
    return (slice_of(full, attrs["axis"]), full)


# dst = alpha * src broadcast along `axis` (NNTile's scale_slice); every axis may split
add_spec(OpSpec(name="scale_slice", kernel="scale_slice", num_inputs=1, num_outputs=1,
                infer=scale_slice_infer, axes=scale_slice_axes,
                attrs={"alpha": 1.0, "axis": 0, "size": REQUIRED},
                kernel_attrs=("alpha", "axis"), flops=lambda attrs, i, o: numel(o[0]),
                backward=scale_slice_rule))


def register(registry: dict) -> None:
    """Add the rope entries to `registry` (graph/families.py calls it)."""
    add_entries(registry, ENTRIES)

