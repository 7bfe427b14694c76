"""Plan layer: lowering one op to tile task groups from its axis map alone.

A group is everything that writes one output tile: a list of steps over the tiles
of the summed axes (gemm's K loop). The builder sets each step's beta: the op's
beta for the first step a rank runs into a tile, 1 after it.
"""

from __future__ import annotations

import bisect
import itertools
from dataclasses import replace
from operator import getitem, itemgetter
from typing import NamedTuple

import numpy as np

from .axes import op_axes
from .kernel_params import KernelParams, checked_params
from .step_table import StepTable

# A rank lowering alone gets the steps of a group with at least this many as a
# StepTable (tests lower it to 2 so that the small oracle worlds take that path).
TABLE_MIN_STEPS = 32


class Step(NamedTuple):   # PERF: a NamedTuple builds faster than a frozen dataclass
    keys: tuple          # kernel arrays: input tile keys, then output tile keys
    params: KernelParams  # immutable, shared between steps
    flops: int


class TaskGroup(NamedTuple):
    op: object
    outputs: tuple       # output tile keys
    steps: tuple
    reads_output_first: bool   # does step 0 read the old output?
    coord: tuple               # the tile of the op's first output (before any view)


def lower_op(op, tilings, views=None, coords=None):
    """The task groups of `op`, one per tile of its first output (those of `coords`
    only, in that order, when given: one rank's share, whose long groups then come
    with StepTable steps; `coords` None gives tuples of steps).

    `views` (plan/views.py) maps the tiles of view outputs to the input tiles they
    alias: a view op lowers to nothing, and the keys of other ops are rewritten.
    """
    if views and any(t.name in views.names for t in op.inputs + op.outputs):
        if op.spec.view and op.outputs[0].name in views.names:
            return []
        return [reading_views(group, views) for group in lower_op(op, tilings, None, coords)]
    spec = op.spec
    axes = op_axes(op)
    arrays = op.inputs + op.outputs
    n_inputs = len(op.inputs)
    output_labels = set(itertools.chain(*axes[n_inputs:]))
    counts = label_tile_counts(arrays, axes, tilings)
    summed = sorted({label for labels in axes[:n_inputs] for label in labels} - output_labels)
    windows = {} if spec.windows is None else spec.windows(
        op.attrs, [t.shape for t in op.inputs], [t.shape for t in op.outputs])
    summed.sort(key=lambda label: label in windows)   # a window's source comes first
    if any(counts[label] > 1 for label in summed):
        assert spec.beta_attr or spec.combine is None, \
            f"{op.op_type} sums over tiles but its kernel has no beta"
    base_params = spec.kernel_params(op.attrs)
    if spec.shape_params is not None:
        base_params |= spec.shape_params(op.attrs, [t.shape for t in op.inputs],
                                         [t.shape for t in op.outputs])
    if spec.dtype_params is not None:
        base_params |= spec.dtype_params([t.dtype for t in op.inputs],
                                         [t.dtype for t in op.outputs])
    base_params = checked_params(op, spec.kernel, base_params if spec.tile_params is None
                                 else {**base_params, **first_tile_params(op, tilings)})
    reads_output = spec.reads_output(op.attrs)
    # PERF (plan-speed tests): each step's tile coordinates are one vector (output
    # tile coordinate, then summed-label indices) from which per-array pickers take
    # the keys, and FLOPs are memoized by the tile sizes of all labels, instead of
    # dicts per step and tile_shape() + the FLOP rule for every step.
    vector_labels = tuple(axes[n_inputs]) + tuple(summed)
    sizes = label_tile_sizes(arrays, axes, tilings)
    size_tables = [sizes[label] for label in vector_labels]
    assert set(sizes) <= set(vector_labels), f"{op.name}: a label is neither output nor summed"
    pickers = [(t.name, picker([vector_labels.index(label) for label in labels]))
               for t, labels in zip(arrays, axes)]
    flops_memo = {}
    groups = []
    summed_ranges = list(itertools.product(*[range(counts[label]) for label in summed]))
    bounds = label_boundaries(arrays, axes, tilings) if windows else None
    needed = step_filter(op, arrays, tilings)
    absent = absent_tiles(op, arrays, tilings)

    def step_of(vector, keys):
        signature = tuple(map(getitem, size_tables, vector))
        flops = flops_memo.get(signature)
        if flops is None:
            flops = flops_memo[signature] = step_flops(op, keys, tilings)
        params = base_params if spec.tile_params is None else \
            step_params(op, base_params, keys, tilings)
        return Step(keys, params, flops)

    # a StepTable holds every step of the range: not for structurally absent tiles
    table = coords is not None and not windows and needed is None and not absent and \
        len(summed_ranges) >= TABLE_MIN_STEPS and \
        len({t.name for t in op.inputs}) == n_inputs
    if table:   # one rank lowering alone: steps built on demand (plan/step_table.py)
        combo_array = np.array(summed_ranges, dtype=np.int64).reshape(len(summed_ranges), -1)
        columns = [tuple(vector_labels.index(label) for label in labels) for labels in axes]

        def make_step(vector):
            return step_of(vector, tuple([(name, pick(vector)) for name, pick in pickers]))
    out_coords = tilings[op.outputs[0].name].coords() if coords is None else coords
    if op.outputs[0].causal_dims is not None:
        out_coords = ring_order(out_coords, op.outputs[0].causal_dims)
    for out_coord in out_coords:
        if table:
            outputs = tuple([(name, pick(out_coord)) for name, pick in pickers[n_inputs:]])
            steps = StepTable(out_coord, summed_ranges, combo_array, columns, make_step)
            groups.append(TaskGroup(op, outputs, steps, reads_output, out_coord))
            continue
        if absent and is_absent(absent, [(name, pick(out_coord))
                                         for name, pick in pickers[n_inputs:]]):
            continue   # a structurally absent output tile: nothing writes it
        steps, skipped = [], False
        if windows:
            summed_ranges = windowed_combos(out_coord, vector_labels, windows, bounds)
            if not summed_ranges and spec.beta_attr:   # the output still takes its beta
                summed_ranges = windowed_combos(out_coord, vector_labels, windows, bounds,
                                                nearest=True)
        for combo in summed_ranges:
            vector = out_coord + combo
            keys = tuple([(name, pick(vector)) for name, pick in pickers])
            if needed is not None and not needed(keys):
                continue
            if absent and is_absent(absent, keys[:n_inputs]):
                skipped = True
                continue   # its contribution is the combine's identity (0, or -inf)
            steps.append(step_of(vector, keys))
        if not steps:
            if skipped:
                raise ValueError(f"{op.op_type} {op.name}: its tile {out_coord} would read "
                                 "only structurally absent (causal) tiles")
            if needed is None or not spec.beta_attr or op.attrs[spec.beta_attr] != 0:
                continue   # the tile keeps its value: nothing to run
            # beta = 0 clears the tile even where no input tile meets it
            keys = tuple([(name, pick(out_coord + summed_ranges[0])) for name, pick in pickers])
            steps.append(Step(keys, step_params(op, base_params, keys, tilings), 0))
        outputs = tuple([(name, pick(out_coord)) for name, pick in pickers[n_inputs:]])
        groups.append(TaskGroup(op, outputs, tuple(steps), reads_output, out_coord))
    return groups


def ring_order(coords, causal_dims):
    """The tiles of a [key, query] (causal) tensor in tile order, except that each query
    tile walks its key tiles from the diagonal back: key tile q, q - 1, ..., 0. Under a
    cp mesh a rank so first computes with its own key tiles, then with those of the
    previous cp rank, and so on round the ring (docs/context_parallel.md). Only the
    order of independent output tiles changes: no sum's order, so no result's bits."""
    key_dim, query_dim = causal_dims

    def position(coord):
        ring = list(coord)
        ring[key_dim] = coord[query_dim] - coord[key_dim]
        return ring[::-1]   # tile order is the first dim fastest
    return sorted(coords, key=position)


def windowed_combos(out_coord, vector_labels, windows, bounds, nearest=False):
    """Summed-label tile combos of one output tile, a windowed label restricted to the
    tiles meeting its window under the source label's tile. An empty window gives no
    combo (copy_intersection leaves such a tile alone) or, with `nearest`, the nearest
    tile: a conv output tile entirely in padding still needs a step to apply its beta."""
    n_out = len(out_coord)
    combos = [tuple(out_coord)]
    for label in vector_labels[n_out:]:
        boundaries = bounds[label]
        last = len(boundaries) - 2
        if label in windows:
            source, window = windows[label]
            source_position = vector_labels.index(source)
            source_bounds = bounds[source]
        extended = []
        for vector in combos:
            if label not in windows:
                extended.extend(vector + (tile,) for tile in range(last + 1))
                continue
            tile = vector[source_position]
            low, high = window(source_bounds[tile], source_bounds[tile + 1])
            first = min(max(bisect.bisect_right(boundaries, low) - 1, 0), last)
            stop = min(bisect.bisect_left(boundaries, high), last + 1)
            if low >= boundaries[-1] or high <= 0 or high <= low:
                stop = first + 1 if nearest else first
            elif nearest:
                stop = max(stop, first + 1)
            extended.extend(vector + (index,) for index in range(first, stop))
        combos = extended
    return [vector[n_out:] for vector in combos]


def label_boundaries(arrays, axes, tilings):
    """Label -> tile boundaries of its axis."""
    return {label: tilings[tensor.name].dims[dim].boundaries
            for tensor, labels in zip(arrays, axes) for dim, label in enumerate(labels)}


class ViewReadingOp(NamedTuple):
    """An op some of whose operand tiles are views: its kernel gets them reshaped."""
    name: str
    op_type: str
    inputs: tuple
    outputs: tuple
    attrs: dict
    phase: str
    spec: object


def reading_views(group, views):
    """`group` with view keys replaced by the input tiles they alias."""
    op = group.op
    proxy = ViewReadingOp(op.name, op.op_type, op.inputs, op.outputs, op.attrs, op.phase,
                          replace(op.spec, kernel="reshaped_call"))
    steps = []
    for step in group.steps:
        keys, shapes = list(step.keys), []
        for position, key in enumerate(step.keys):
            if key in views:
                keys[position], shape = views[key]
                shapes.append((position, shape))
        params = step.params.with_values(view_kernel=op.spec.kernel, view_shapes=tuple(shapes))
        steps.append(Step(tuple(keys), params, step.flops))
    outputs = steps[0].keys[len(op.inputs):] if steps else \
        tuple(views.get(key, (key,))[0] for key in group.outputs)
    return TaskGroup(proxy, outputs, tuple(steps), group.reads_output_first, group.coord)


# the combines whose identity an absent tile stands for: 0 in sums (absent probabilities
# and gradients), -inf in logsumexp (absent scores)
SKIPPING_COMBINES = ("add", "logsumexp_merge")


def absent_tiles(op, arrays, tilings):
    """{name: coord -> whether the tile is structurally absent} of the block-sparse
    operands (TensorNode.causal_dims: every key index > every query index); {} if none.

    Only the ops of causal attention and its gradient read such tensors: their readers
    skip absent tiles (an elementwise reader's output is absent too; a sum's or a
    logsumexp's other steps go on), which leaves every present tile bitwise as it is
    with a dense tensor holding -inf or 0 there.
    """
    tests = {}
    for tensor in arrays:
        if tensor.causal_dims is None or tensor.name in tests:
            continue
        if op.spec.combine not in SKIPPING_COMBINES and tensor in op.inputs and \
                tensor not in op.outputs:
            raise ValueError(f"{op.op_type} {op.name}: reads the block-sparse (causal) "
                             f"{tensor.describe()}, but its partial results merge by "
                             f"{op.spec.combine}, which an absent tile cannot join")
        key_dim, query_dim = tensor.causal_dims
        dims = tilings[tensor.name].dims
        tests[tensor.name] = absent_test(dims[key_dim].boundaries, dims[query_dim].boundaries,
                                         key_dim, query_dim)
    return tests


def absent_test(key_bounds, query_bounds, key_dim, query_dim):
    def absent(coord):   # the tile's first key comes after its last query
        return key_bounds[coord[key_dim]] >= query_bounds[coord[query_dim] + 1]
    return absent


def is_absent(absent, keys):
    return any(name in absent and absent[name](coord) for name, coord in keys)


def step_filter(op, arrays, tilings):
    """keys -> whether the step changes its output tile (OpSpec.step_needed), or None."""
    if op.spec.step_needed is None:
        return None
    whole_shapes = [t.shape for t in arrays]

    def needed(keys):
        offsets = [tilings[name].tile_offset(coord) for name, coord in keys]
        shapes = [tilings[name].tile_shape(coord) for name, coord in keys]
        return op.spec.step_needed(op.attrs, offsets, shapes, whole_shapes)
    return needed


def picker(positions):
    """A function vector -> tuple of the vector's items at `positions`."""
    if not positions:
        return lambda vector: ()
    if len(positions) == 1:
        position = positions[0]
        return lambda vector: (vector[position],)
    return itemgetter(*positions)


def label_tile_counts(arrays, axes, tilings):
    counts = {}
    for tensor, labels in zip(arrays, axes):
        for dim, label in enumerate(labels):
            counts[label] = tilings[tensor.name].dims[dim].num_tiles
    return counts


def label_tile_sizes(arrays, axes, tilings):
    """Label -> tuple of its tile sizes."""
    sizes = {}
    for tensor, labels in zip(arrays, axes):
        for dim, label in enumerate(labels):
            sizes[label] = tilings[tensor.name].dims[dim].sizes
    return sizes


def step_params(op, base_params, keys, tilings):
    """The params of one step: the op's, with those of its tiles (OpSpec.tile_params)."""
    if op.spec.tile_params is None:
        return base_params
    offsets = [tilings[name].tile_offset(coord) for name, coord in keys]
    return KernelParams(base_params, **op.spec.tile_params(op.attrs, offsets))


def first_tile_params(op, tilings):
    """The tile params of the op's first tiles: checked with the op's own at lowering."""
    arrays = op.inputs + op.outputs
    offsets = [tilings[t.name].tile_offset((0,) * t.ndim) for t in arrays]
    return op.spec.tile_params(op.attrs, offsets)


def step_flops(op, keys, tilings):
    shapes = [tilings[name].tile_shape(coord) for name, coord in keys]
    n_inputs = len(op.inputs)
    return int(op.spec.flops(op.attrs, shapes[:n_inputs], shapes[n_inputs:]))
