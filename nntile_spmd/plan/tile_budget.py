"""Plan layer: the default auto tiling sized by the number of tasks it makes per rank.

A fixed target tile size suits small graphs but not a large model: 1 MiB tiles of a
2-layer GPT-2-XL gave one rank of 16 about 1.9 million instructions, as a gemm's tasks
grow with the product of its three axes' tile counts.
A task of a 1 MiB fp32 tile already runs for milliseconds on a CPU, so tasks are big
enough at that size; what must be bounded is their number. `TilingStrategy.auto()`
with no explicit target therefore starts at 1 MiB and doubles the target until the
estimated tasks per rank (every op's step count over its tiles' grid, summed, over
the ranks) fit TASK_BUDGET. An explicit `target_tile_bytes` is taken as given.
The reasons, per axis class, are kept for dump_plan().

On a device whose every task pays a launch (a GPU: plan/device_profile.py) the budget
does not apply: tiles are as large as the distribution allows (one tile per rank on
the axes a preset splits, which are also the pipeline's micro-batches), unless a tile
would take more than 1/TILES_IN_MEMORY of the device's memory (or memory budget).

Imports the graph layer and plan/axes.py only.
"""

from __future__ import annotations

from math import prod

from .axes import op_axes

TASK_BUDGET = 16384          # estimated tasks per rank the default tiling aims below
LARGEST_TARGET = 1 << 30     # a target beyond this would leave most tensors whole
# a gemm's three tiles, received copies and the optimizer's state must fit beside the
# rank's share of the model: no tile above this fraction of the device's memory
TILES_IN_MEMORY = 64


def estimated_tasks_per_rank(request, chosen) -> int:
    """Sum over ops of the tiles of all their labels (output tiles x summed steps),
    divided by the ranks: an estimate that ignores causal blocks and windows."""
    total = 0
    for op in request.graph.ops():
        tiles = {}
        for tensor, labels in zip(list(op.inputs) + list(op.outputs), op_axes(op)):
            for dim, label in enumerate(labels):
                tiles[label] = chosen[request.class_of[(tensor.name, dim)]].num_tiles
        total += prod(tiles.values())
    return -(-total // request.nranks)


def sized_target(resolve_at, request, start):
    """(target, chosen tilings, note): the smallest power-of-two multiple of `start`
    whose tiling fits TASK_BUDGET per rank (or LARGEST_TARGET)."""
    target = start
    chosen, reasons = resolve_at(target)
    first = tasks = estimated_tasks_per_rank(request, chosen)
    while tasks > TASK_BUDGET and target < LARGEST_TARGET:
        target *= 2
        chosen, reasons = resolve_at(target)
        tasks = estimated_tasks_per_rank(request, chosen)
    if target == start:
        note = (f"auto target {human(target)}: ~{tasks} tasks per rank, within the "
                f"budget of {TASK_BUDGET}")
    else:
        note = (f"auto target {human(target)}: {human(start)} tiles gave ~{first} tasks "
                f"per rank, over the budget of {TASK_BUDGET}; {human(target)} gives "
                f"~{tasks}")
    return target, chosen, [note] + reasons


def device_target(profile) -> tuple:
    """(target, note) for a device whose tasks pay a launch: the largest tile it holds."""
    target = profile.memory_bytes // TILES_IN_MEMORY
    note = (f"device {profile.name}: every task pays a {profile.launch_s * 1e6:g} us launch, "
            f"so tiles are as large as the distribution allows, each within 1/"
            f"{TILES_IN_MEMORY} of its {human(profile.memory_bytes)} ({human(target)})")
    return target, note


def human(nbytes) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if nbytes >= 1 << shift:
            return f"{nbytes / (1 << shift):g} {unit}"
    return f"{nbytes} B"
