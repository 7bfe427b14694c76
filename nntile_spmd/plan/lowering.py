"""Plan layer: lowering one op to tile task groups from its axis map alone.

A group is everything that writes one output tile: a list of steps over the tiles
of the summed axes (gemm's K loop). The builder sets each step's beta: the op's
beta for the first step a rank runs into a tile, 1 after it.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from .axes import op_axes


@dataclass(frozen=True)
class Step:
    keys: tuple          # kernel arrays: input tile keys, then output tile keys
    params: dict
    flops: int


@dataclass(frozen=True)
class TaskGroup:
    op: object
    outputs: tuple       # output tile keys
    steps: tuple
    reads_output_first: bool   # does step 0 read the old output?


def lower_op(op, tilings):
    """All task groups of `op`, one per tile of its first output."""
    spec = op.spec
    axes = op_axes(op)
    arrays = op.inputs + op.outputs
    n_inputs = len(op.inputs)
    output_labels = set(itertools.chain(*axes[n_inputs:]))
    counts = label_tile_counts(arrays, axes, tilings)
    summed = sorted({label for labels in axes[:n_inputs] for label in labels} - output_labels)
    if any(counts[label] > 1 for label in summed):
        assert spec.beta_attr, f"{op.op_type} sums over tiles but its kernel has no beta"
    base_params = spec.kernel_params(op.attrs)
    first_output = op.outputs[0]
    groups = []
    for out_coord in tilings[first_output.name].coords():
        fixed = dict(zip(axes[n_inputs], out_coord))
        steps = []
        ranges = [range(counts[label]) for label in summed]
        for combo in itertools.product(*ranges):
            coords = fixed | dict(zip(summed, combo))
            keys = tuple((t.name, tuple(coords[label] for label in labels))
                         for t, labels in zip(arrays, axes))
            params = step_params(op, base_params, keys, tilings)
            steps.append(Step(keys, params, step_flops(op, keys, tilings)))
        groups.append(TaskGroup(op, keys[n_inputs:], tuple(steps),
                                spec.reads_output(op.attrs)))
    return groups


def label_tile_counts(arrays, axes, tilings):
    counts = {}
    for tensor, labels in zip(arrays, axes):
        for dim, label in enumerate(labels):
            counts[label] = tilings[tensor.name].dims[dim].num_tiles
    return counts


def step_params(op, base_params, keys, tilings):
    params = dict(base_params)
    if op.spec.tile_params is not None:
        offsets = [tilings[name].tile_offset(coord) for name, coord in keys]
        params.update(op.spec.tile_params(op.attrs, offsets))
    return params


def step_flops(op, keys, tilings):
    shapes = [tilings[name].tile_shape(coord) for name, coord in keys]
    n_inputs = len(op.inputs)
    return int(op.spec.flops(op.attrs, shapes[:n_inputs], shapes[n_inputs:]))
