"""Search layer: the candidate space autoplan walks, as tables.

A candidate is a distribution (a preset, or a mesh of the axes below whose sizes
multiply to the world size), a tiling, and whether activations are recomputed and
tiles offloaded. Adding a mesh axis is one entry of MESH_AXES. Imports the plan and
graph layers only.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from ..plan.tiling import TilingStrategy


@dataclass(frozen=True)
class AxisRule:
    """One mesh axis: the preset it is alone on the world, its largest size, and
    whether a large world (priced per rank, search/ranks.py) may use it."""

    preset: str
    max_size: int | None = None   # None: any divisor of the world
    large_worlds: bool = True


# Mesh axes in mesh order (outermost first, as plan/mesh.py reads a mesh). tp stops
# at 8: past that its activation all-reduces cross more ranks than a node has GPUs
# in any machine this targets, and the search would spend its time on meshes that
# lose; cp likewise (its key/value tiles travel to every later rank of the axis).
MESH_AXES = {
    "dp": AxisRule("ddp"),
    "fsdp": AxisRule("fsdp"),
    "tp": AxisRule("tp", max_size=8),
    # a rank's own time cannot see a pipeline's bubble (ranks waiting for micro-batches):
    # only the replay of a small world prices pp
    "pp": AxisRule("pp", large_worlds=False),
    # splits the sequence; a graph without attention has none, and its cp candidates
    # fail to plan and are dropped with the planner's reason
    "cp": AxisRule("cp", max_size=8),
}
MAX_MESH_AXES = 2   # meshes of more axes multiply the search; none of ours needs them
# Axes after a mesh's first stay within a node (8 GPUs): HSDP's fsdp groups, tp, pp
# stages; the first axis spans the nodes.
MAX_INNER_AXIS = 8
# target tile bytes tried; None: auto's own size, doubled while tasks per rank are many.
# A large world (planned on a few ranks, search/ranks.py) tries auto's size only, and
# no 'single' (one rank holding and computing everything never wins there).
TILE_TARGETS = (None, 1 << 14, 1 << 18)
LARGE_WORLD_TILE_TARGETS = (None,)
# In the order tried: a variant that saves memory costs time (recomputed FLOPs,
# copies to and from the second tier), so it is tried only where every lighter
# variant of the same distribution and tiling exceeds the budget (space.dominated).
MEMORY_VARIANTS = ((False, False), (True, False), (False, True), (True, True))
# Forward ops of one recompute segment, by name: transformer blocks ("h3_..." in
# GPT-2, "layers3_..." in Llama); a graph without such names gets sqrt(n) runs of
# consecutive forward ops (Chen et al. 2016's checkpoint spacing).
BLOCK_PATTERNS = (re.compile(r"^(h\d+_)"), re.compile(r"^(layers?\d+_)"))


@dataclass(frozen=True)
class Choice:
    """One point of the space, before it is planned."""

    distribution: object      # a preset name or {axis: size}
    tile_bytes: object        # a TILE_TARGETS entry, or a TilingStrategy the caller gave
    recompute: bool
    offload: bool

    @property
    def group(self) -> tuple:
        """What its memory variants share: the distribution and the tile size."""
        return (repr(self.distribution), repr(self.tile_bytes))

    @property
    def label(self) -> str:
        dist = self.distribution if isinstance(self.distribution, str) else \
            "x".join(f"{axis}{size}" for axis, size in self.distribution.items())
        tiles = ("auto" if self.tile_bytes is None else f"{self.tile_bytes >> 10}KiB"
                 if isinstance(self.tile_bytes, int) else "given")
        return (f"{dist}/{tiles}" + ("/recompute" if self.recompute else "")
                + ("/offload" if self.offload else ""))

    def tiling(self) -> TilingStrategy:
        if isinstance(self.tile_bytes, TilingStrategy):
            return self.tile_bytes
        return TilingStrategy.auto(target_tile_bytes=self.tile_bytes)


def factorizations(nranks, axes, max_axes) -> list:
    """Ordered size tuples >= 2, one per axis of a sub-sequence of `axes` (in table
    order), whose product is `nranks`: every mesh of at most `max_axes` axes."""
    result = []

    def extend(start, left, chosen):
        if left == 1 and chosen:
            result.append(dict(chosen))
        if len(chosen) == max_axes:
            return
        for index in range(start, len(axes)):
            axis = axes[index]
            limit = min(MESH_AXES[axis].max_size or left,
                        MAX_INNER_AXIS if chosen else left)
            for size in range(2, min(left, limit) + 1):
                if left % size == 0:
                    extend(index + 1, left // size, chosen + [(axis, size)])

    extend(0, nranks, [])
    return result


def distributions(nranks, large=False) -> list:
    """Presets, then meshes of two or more axes, for a world of `nranks`."""
    if nranks == 1:
        return ["single"]
    result = [] if large else ["single"]
    axes = [axis for axis, rule in MESH_AXES.items() if rule.large_worlds or not large]
    for mesh in factorizations(nranks, axes, MAX_MESH_AXES):
        if len(mesh) == 1:
            axis, size = next(iter(mesh.items()))
            result.append(MESH_AXES[axis].preset)
        else:
            result.append(mesh)
    return result


def choices(nranks, with_budget: bool, can_recompute: bool, large=False,
            tilings=None) -> list:
    """Every Choice, memory variants last-to-try within each (distribution, tiling);
    `tilings`: TilingStrategies to try instead of the table's tile sizes."""
    # without a budget no lighter variant exceeds one: the plain variant only
    variants = [(r, o) for r, o in MEMORY_VARIANTS
                if (can_recompute or not r) and (with_budget or not (r or o))]
    targets = list(tilings) if tilings else \
        LARGE_WORLD_TILE_TARGETS if large else TILE_TARGETS
    return [Choice(dist, tiles, recompute, offload)
            for dist in distributions(nranks, large)
            for tiles in targets for recompute, offload in variants]


def dominated(choice, fitting) -> bool:
    """Does a lighter variant of `choice` (same distribution and tiles, a subset of its
    memory savings) already fit? Then `choice` can only be slower (more FLOPs, more
    copies) and is not planned."""
    return any((r, o) != (choice.recompute, choice.offload)
               and (not r or choice.recompute) and (not o or choice.offload)
               and choice.group + (r, o) in fitting for r, o in MEMORY_VARIANTS)


def recompute_segments(graph) -> list:
    """Segments for graph.recompute: forward ops grouped by transformer block name, or
    sqrt(n) runs of consecutive forward ops (the last one, usually the loss, left out)."""
    forward = [op for op in graph.ops() if op.phase == "forward"]
    for pattern in BLOCK_PATTERNS:
        prefixes = []
        for op in forward:
            found = pattern.match(op.outputs[0].name) if op.outputs else None
            if found and found.group(1) not in prefixes:
                prefixes.append(found.group(1))
        if prefixes:
            return prefixes
    body = forward[:-1]
    if len(body) < 2:
        return []
    run = max(1, math.isqrt(len(body)))
    return [body[start:start + run] for start in range(0, len(body), run)]
