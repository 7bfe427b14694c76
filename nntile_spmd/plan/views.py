"""Plan layer: ops whose output tiles are input tiles seen with another shape (views).

A reshape or slice (OpSpec.view names its rule) is a view when every output tile
holds exactly the elements of one input tile, in the same column-major order: the
output's tiles then alias the input's. Lowering rewrites every later key of an
output tile into its input tile's key (views.alias) and the op itself lowers to
nothing, so the plan has no copy task, no transfer and no extra tile for it; the
kernels that read the alias get the tile reshaped (kernel "reshaped_call").

The aliasing must not be observable, so a view also needs: the output is an
intermediate (not bound, returned or kept), the op writes it whole (beta = 0) and
nothing else writes it, nothing writes the input while the output is in use, and
the input is not itself a view. Otherwise the op is a planned copy.
"""

from __future__ import annotations

import math


def contiguous_tiles(spec, shape):
    """{first flat index: (coord, size)} of the tiles of `spec` that are one column-major
    run: full in every dim before some dim k, one element in every dim after it."""
    runs = {}
    for coord in spec.coords():
        tile, offset = spec.tile_shape(coord), spec.tile_offset(coord)
        split = [d for d, (n, total) in enumerate(zip(tile, shape)) if n != total]
        if any(tile[d] != 1 for d in split[1:]):
            continue
        first, stride = 0, 1
        for start, total in zip(offset, shape):
            first += start * stride
            stride *= total
        runs[first] = (coord, math.prod(tile))
    return runs


def flat_view(op, tilings):
    """reshape: {output coord: input coord} when every output tile is an input tile's run."""
    (x,), (y,) = op.inputs, op.outputs
    x_runs = contiguous_tiles(tilings[x.name], x.shape)
    y_runs = contiguous_tiles(tilings[y.name], y.shape)
    if len(y_runs) != len(tilings[y.name].coords()):
        return None
    mapping = {}
    for first, (coord, size) in y_runs.items():
        match = x_runs.get(first)
        if match is None or match[1] != size:
            return None
        mapping[coord] = match[0]
    return mapping


def box_view(op, tilings):
    """slice: {output coord: input coord} when every output tile is an input tile."""
    (x,), (y,) = op.inputs, op.outputs
    axis, start = op.attrs["axis"], op.attrs["start"]
    x_spec = tilings[x.name]
    x_tiles = {(x_spec.tile_offset(c), x_spec.tile_shape(c)): c for c in x_spec.coords()}
    mapping = {}
    y_spec = tilings[y.name]
    for coord in y_spec.coords():
        offset = list(y_spec.tile_offset(coord))
        offset[axis] += start
        match = x_tiles.get((tuple(offset), y_spec.tile_shape(coord)))
        if match is None:
            return None
        mapping[coord] = match
    return mapping


VIEW_RULES = {"flat": flat_view, "box": box_view}


class Views(dict):
    """{(output name, coord): (input key, output tile shape)}; `names`: the view outputs."""

    names: frozenset = frozenset()


def find_views(graph, tilings) -> Views:
    """The tiles of every op planned as a view (an empty Views when there is none)."""
    ops = graph.ops()
    writers = {}
    for index, op in enumerate(ops):
        for tensor in op.outputs:
            writers.setdefault(tensor.name, []).append(index)
    aliases, viewed = Views(), set()
    for index, op in enumerate(ops):
        rule = VIEW_RULES.get(op.spec.view)
        if rule is None or not may_alias(op, index, ops, writers, viewed):
            continue
        mapping = rule(op, tilings)
        if mapping is None:
            continue
        (x,), (y,) = op.inputs, op.outputs
        spec = tilings[y.name]
        for coord, source in mapping.items():
            aliases[(y.name, coord)] = ((x.name, source), spec.tile_shape(coord))
        viewed.add(y.name)
    aliases.names = frozenset(viewed)
    return aliases


def may_alias(op, index, ops, writers, viewed) -> bool:
    """Would a reader tell the output's tiles from the input's? (see the module doc)"""
    (x,), (y,) = op.inputs, op.outputs
    if y.keeps_storage or x.name in viewed or op.attrs[op.spec.beta_attr] != 0 or \
            writers[y.name] != [index]:
        return False
    last_use = max((i for i, later in enumerate(ops)
                    if any(t.name == y.name for t in later.inputs)), default=index)
    return not any(index < i <= last_use for i in writers.get(x.name, ()))
