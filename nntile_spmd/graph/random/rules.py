"""Graph layer: registry entries of randn (NNTile's randn: dst is the block at
`start` of a normal tensor of shape `underlying_shape`) and dropout. Each tile gets its
offset in the whole tensor, so its kernel draws exactly the numbers of its elements:
every tiling and rank count gives the same tensor (and the same dropout mask).
"""

from __future__ import annotations

from .. import ops
from ..checks import (elementwise_axes, elementwise_flops, elementwise_infer, given_output,
                      numel, output_only_axes)
from ..registry import REQUIRED, OpSpec, add_entries

ENTRIES: list[OpSpec] = []   # the family's registry entries, in writing order
add_spec = ENTRIES.append   # each add_spec(OpSpec(...)) below joins ENTRIES


def randn_offset(attrs, offsets):
    start = attrs["start"] or (0,) * len(offsets[0])
    return {"offset": tuple(s + o for s, o in zip(start, offsets[0]))}


add_spec(OpSpec(name="randn", kernel="randn", num_inputs=0, num_outputs=1, infer=given_output,
                axes=output_only_axes,
                attrs={"seed": REQUIRED, "mean": 0.0, "stddev": 1.0, "start": None,
                       "underlying_shape": None},
                kernel_attrs=("seed", "mean", "stddev"), tile_params=randn_offset,
                shape_params=lambda attrs, i, o: {
                    "shape": tuple(attrs["underlying_shape"] or o[0])},
                flops=lambda attrs, i, o: 20 * numel(o[0]), differentiable=False))


# -- dropout: y = x / (1 - p) where a keyed uniform of the element's index exceeds p, else 0
def dropout_offset(attrs, offsets):
    return {"offset": tuple(offsets[-1])}


def dropout_rule(op, ctx):
    """dx += dropout(dy) with the same site, step and p: the mask is a function of the
    element's index, so backward draws it again instead of keeping it."""
    (x,), (y,) = op.inputs, op.outputs
    if ctx.needs(x):
        dropped = ops.dropout(ctx.grad(y), ctx.temp(f"{x.name}_ddropout"), **op.attrs)
        ops.add_inplace(1.0, dropped, 1.0, ctx.grad(x))


add_spec(OpSpec(name="dropout", kernel="dropout", num_inputs=1, num_outputs=1,
                infer=elementwise_infer, axes=elementwise_axes,
                attrs={"p": 0.0, "seed": REQUIRED, "step": 0.0},
                tile_params=dropout_offset,
                shape_params=lambda attrs, i, o: {"shape": tuple(o[0])},
                flops=elementwise_flops(20), backward=dropout_rule))


def register(registry: dict) -> None:
    """Add the random entries to `registry` (graph/families.py calls it)."""
    add_entries(registry, ENTRIES)

