"""Plan layer: device meshes, `distribution={"dp": 2, "tp": 2}` (or fsdp x tp, dp x pp,
fsdp x tp x pp, and dp x fsdp: HSDP, the batch blocked over both, parameters sharded
over fsdp and replicated over dp).

The ranks form a grid, the first named axis outermost (rank = dp_index * tp + tp_index
for dp x tp). Each mesh axis applies one preset's rule along its own coordinate:
a batch axis (dp or fsdp) blocks the batch tiles over its coordinate, fsdp also deals
parameter, gradient and optimizer-state tiles round-robin over it, and tp blocks the
hidden axes the tp preset would split, and pp puts each tensor on the index of its
pipeline stage (plan/pipeline.py), and cp blocks the sequence axis (plan/sequence.py:
the query dim of attention's [key, query] tensors). A tile no rule places along some
axis is held by every rank along that axis: a parameter shard of dp x tp lives on one tp column
(its replicas across dp), an activation of one dp row on the whole row (replicated
across tp). Such a rank set is a *group*; owners name it by a code below REPLICATED
(group g is `distribution.group_code(g)`, -2 - g), listed in `mesh_groups(shape)`, so
every rank derives the same owners and the same groups alone.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .distribution import AxisRule, group_code

MESH_AXES = ("dp", "fsdp", "tp", "pp", "cp")
BATCH_AXES = ("dp", "fsdp")
SCHEDULES = ("gpipe", "1f1b")
CP_RULES = {"contiguous": "block", "zigzag": "fold"}   # cp_layout -> the axis rule
REPLICATE = AxisRule("replicate")


@dataclass(frozen=True)
class Mesh:
    """A device mesh: ((axis name, size), ...) outer to inner."""

    axes: tuple
    schedule: str = "gpipe"   # with a pp axis: "gpipe" or "1f1b" (plan/pipeline.py)
    cp_layout: str = "contiguous"   # with a cp axis: or "zigzag" (plan/sequence.py)

    def __post_init__(self):
        from .sequence import check_layout
        check_layout(self)
        names = [name for name, _ in self.axes]
        unknown = [name for name in names if name not in MESH_AXES]
        if unknown or not names:
            raise ValueError(f"distribution mesh {self.describe()}: unknown mesh axis "
                             f"{unknown[0] if unknown else None!r}; a mesh names some of "
                             f"{MESH_AXES} with their sizes, e.g. {{'dp': 2, 'tp': 2}}")
        bad = [(name, size) for name, size in self.axes
               if isinstance(size, bool) or not isinstance(size, int) or size < 1]
        if bad:
            raise ValueError(f"distribution mesh {self.describe()}: axis {bad[0][0]!r} needs "
                             f"a positive integer size, got {bad[0][1]!r}")
        if self.schedule not in SCHEDULES or (self.schedule != "gpipe" and "pp" not in names):
            raise ValueError(f"distribution mesh {self.describe()}: schedule "
                             f"{self.schedule!r} needs one of {SCHEDULES} and a pp axis")

    @property
    def name(self) -> str:
        return "x".join(f"{axis}{size}" for axis, size in self.axes)

    @property
    def shape(self) -> tuple:
        return tuple(size for _, size in self.axes)

    def describe(self) -> str:
        return "{" + ", ".join(f"{name!r}: {size!r}" for name, size in self.axes) + "}"

    def check_world(self, nranks):
        if math.prod(self.shape) != nranks:
            raise ValueError(f"distribution mesh {self.describe()} has "
                             f"{math.prod(self.shape)} ranks but the world has {nranks}; "
                             "the product of the mesh sizes must be the world size")

    def rank_groups(self, nranks) -> tuple:
        """The rank sets that group owner codes name (see the module docstring)."""
        self.check_world(nranks)
        return mesh_groups(self.shape)

    def coordinates(self, rank) -> tuple:
        """{axis name: index} of `rank` on the grid."""
        return dict(zip((name for name, _ in self.axes),
                        np.unravel_index(rank, self.shape)))

    def split_classes(self, graph, class_of, classes) -> frozenset:
        batch, hidden = self.batch_and_hidden(graph, class_of, classes)
        sequence = self.sequence_class(graph, class_of, batch, hidden)
        return frozenset({batch, sequence} - {None} | hidden)

    def sequence_class(self, graph, class_of, batch, hidden):
        """The axis class the cp axis blocks (plan/sequence.py); None without cp."""
        if "cp" not in dict(self.axes):
            return None
        from .sequence import sequence_class
        sequence = sequence_class(graph, class_of, f"distribution mesh {self.describe()}")
        if sequence == batch or sequence in hidden:
            raise ValueError(f"distribution mesh {self.describe()}: the sequence axis is "
                             f"also the {'batch' if sequence == batch else 'tensor-parallel'}"
                             " axis; cp needs a separate one")
        return sequence

    def split_tiles(self, graph, class_of, classes) -> tuple:
        """((sequence class, 2 cp),) under a zigzag cp axis: auto tiling then cuts the
        sequence into two blocks per cp rank at least; () otherwise."""
        if self.cp_layout != "zigzag":
            return ()
        sequence = self.sequence_class(graph, class_of, *self.batch_and_hidden(
            graph, class_of, classes))
        return ((sequence, 2 * dict(self.axes)["cp"]),)

    def check_tilings(self, graph, class_of, classes, class_tilings, nranks=None):
        """Every cp rank holds at least one tile of the sequence axis."""
        if "cp" not in dict(self.axes):
            return
        from .sequence import check_sequence_tiles
        sequence = self.sequence_class(graph, class_of, *self.batch_and_hidden(
            graph, class_of, classes))
        check_sequence_tiles(class_tilings[sequence], classes[sequence], dict(self.axes)["cp"],
                             self.cp_layout, f"distribution mesh {self.describe()}")

    def split_ranks(self, graph, class_of, classes) -> dict:
        """{split class: ranks blocking it}: a hidden axis over the tp axis's t ranks,
        the batch over the rest of the grid (the batch axis's ranks, times the
        pipeline stages whose micro-batches its tiles are)."""
        batch, hidden = self.batch_and_hidden(graph, class_of, classes)
        tp = dict(self.axes).get("tp", 1)
        result = dict.fromkeys(hidden, tp)
        if batch is not None:
            result[batch] = math.prod(self.shape) // tp
        return result

    def batch_and_hidden(self, graph, class_of, classes):
        from .presets import default_batch_class, default_tp_classes
        names = {name for name, _ in self.axes}
        # pp does not split the batch over ranks, but its tiles are the micro-batches
        batch = (default_batch_class(graph, class_of, classes)
                 if names & {*BATCH_AXES, "pp"} else None)
        hidden = set(default_tp_classes(graph, class_of, classes)) if "tp" in names else set()
        if batch is not None and batch in hidden:
            raise ValueError(f"distribution mesh {self.describe()}: the batch axis is also "
                             "the tensor-parallel axis (the graph marks no hidden axis); "
                             "mark one with tensor.split_for_tp(dim)")
        return batch, hidden

    def assign(self, graph, class_of, classes, nranks) -> dict:
        """TileDistribution for every tensor name."""
        from .distribution import TileDistribution
        from .presets import SHARDED_ROLES
        self.check_world(nranks)
        batch, hidden = self.batch_and_hidden(graph, class_of, classes)
        sequence = self.sequence_class(graph, class_of, batch, hidden)
        stages = self.tensor_stages(graph)
        batch_rule = self.batch_rules()
        result, offsets = {}, {}
        for tensor in graph.tensors():
            dims = [class_of[(tensor.name, d)] for d in range(tensor.ndim)]
            batch_dims = [d for d, c in enumerate(dims) if c == batch]
            hidden_dims = [d for d, c in enumerate(dims) if c in hidden]
            sequence_dims = [d for d, c in enumerate(dims) if c == sequence]
            rules = []
            for axis, _ in self.axes:
                if axis == "pp":
                    stage = stages[tensor.name]
                    rules.append(REPLICATE if stage is None else AxisRule("fixed", index=stage))
                elif axis == "tp":
                    rules.append(AxisRule("block", hidden_dims[-1]) if hidden_dims
                                 else REPLICATE)
                elif axis == "cp":   # the last: a [key, query] tensor's query dim
                    rules.append(AxisRule(CP_RULES[self.cp_layout], sequence_dims[-1])
                                 if sequence_dims else REPLICATE)
                elif batch_dims:
                    rules.append(AxisRule("block", batch_dims[-1], **batch_rule[axis]))
                elif axis == "fsdp" and tensor.role in SHARDED_ROLES and tensor.ndim > 0:
                    # as the fsdp preset: a parameter, its gradient and state share tiles
                    offsets.setdefault(tuple(dims), len(offsets))
                    rules.append(AxisRule("cyclic", index=offsets[tuple(dims)]))
                else:
                    rules.append(REPLICATE)
            result[tensor.name] = TileDistribution.mesh_layout(self.shape, tuple(rules))
        return result

    def batch_rules(self) -> dict:
        """{batch axis: its block rule's joint-grid fields}. With dp and fsdp both (HSDP)
        the batch is blocked over their joint grid, the outer axis taking the high part
        of the block index; one batch axis needs none."""
        batch = [(name, size) for name, size in self.axes if name in BATCH_AXES]
        if len(batch) < 2:
            return {name: {} for name, _ in batch}
        joint = math.prod(size for _, size in batch)
        return {name: {"inner": math.prod(size for _, size in batch[index + 1:]),
                       "joint": joint}
                for index, (name, _) in enumerate(batch)}

    @property
    def pipelined(self) -> bool:
        """Does the program walk micro-batches in pipeline order (plan/pipeline.py)?"""
        return "pp" in dict(self.axes)

    @property
    def pipeline_stages(self) -> int:
        """Number of pipeline stages (1 without a pp axis)."""
        return dict(self.axes).get("pp", 1)

    def one_f_one_b(self, graph):
        """A pipeline.OneFOneB when the program walks 1F1B, else None (GPipe, no pp)."""
        if self.schedule != "1f1b":
            return None
        from .pipeline import OneFOneB
        names = {name for name, _ in self.axes}
        return OneFOneB(self.tensor_stages(graph), not names & set(BATCH_AXES))

    def tensor_stages(self, graph) -> dict:
        """{tensor name: pipeline stage or None (every stage)}; empty without pp."""
        if "pp" not in dict(self.axes):
            return {}
        from .pipeline import tensor_stages
        return tensor_stages(graph, self.pipeline_stages)


@lru_cache(maxsize=64)
def mesh_groups(shape) -> tuple:
    """Every rank set of `shape` that is a proper sub-grid: per choice of replicated
    axes (neither none nor all, in order of their bit masks), one group per index of
    the other axes (outer to inner). Group g has owner code group_code(g)."""
    groups = []
    for mask in range(1, (1 << len(shape)) - 1):
        replicated = [axis for axis in range(len(shape)) if mask >> axis & 1]
        fixed = [axis for axis in range(len(shape)) if not mask >> axis & 1]
        for fixed_index in itertools.product(*(range(shape[a]) for a in fixed)):
            ranks = []
            for free_index in itertools.product(*(range(shape[a]) for a in replicated)):
                index = [0] * len(shape)
                for axis, value in zip(fixed + replicated, fixed_index + free_index):
                    index[axis] = value
                ranks.append(int(np.ravel_multi_index(index, shape)))
            groups.append(tuple(sorted(ranks)))
    return tuple(groups)


def column_layout(spec):
    """A mesh layout with its fsdp shards widened to the whole batch axis (the rule
    ("cyclic", k) replicated): the ranks a sharded tile is gathered to for compute,
    its *column* (a tp column of fsdp x tp). None for a layout without shards.

    ZeRO-3 gathers a shard before any rank computes with it, so steps and trees
    that read it count it as held by its column: a vocabulary-parallel embedding
    then sums on the rank of each row in the tile's tp column, instead of on the
    one rank holding the shard (fetching the rows' activations) or on the first
    rank of each row (fetching every column's shards: the whole matrix per rank)."""
    if spec.kind != "mesh" or not any(rule.kind == "cyclic" for rule in spec.mesh.rules):
        return None
    shape, rules = spec.mesh
    widened = tuple(REPLICATE if rule.kind == "cyclic" else rule for rule in rules)
    if all(rule.kind == "replicate" for rule in widened):
        return None   # the whole world: counts like a replicated tile
    return type(spec).mesh_layout(shape, widened)


def mesh_owners(spec, linear, grid, nranks):
    """Owner (rank, REPLICATED or group code) of every tile under a mesh layout."""
    shape, rules = spec.mesh
    if math.prod(shape) != nranks:
        raise ValueError(f"mesh layout of {math.prod(shape)} ranks in a world of {nranks}")
    coords = np.indices(grid) if grid else np.zeros((0,), dtype=np.int64)
    index = [axis_index(rule, size, coords, linear, grid) for rule, size in zip(rules, shape)]
    replicated = [axis for axis, value in enumerate(index) if value is None]
    if len(replicated) == len(shape):
        return -1   # REPLICATED: every rank holds the tile
    if not replicated:
        return np.ravel_multi_index(tuple(np.broadcast_to(i, linear.shape) for i in index),
                                    shape)
    mask = sum(1 << axis for axis in replicated)
    first_group = sum(math.prod(shape[a] for a in range(len(shape)) if not m >> a & 1)
                      for m in range(1, mask))
    fixed = [axis for axis in range(len(shape)) if axis not in replicated]
    within = np.ravel_multi_index(tuple(np.broadcast_to(index[a], linear.shape)
                                        for a in fixed), tuple(shape[a] for a in fixed))
    return group_code(first_group + within)


def axis_index(rule, size, coords, linear, grid):
    """Each tile's index along one mesh axis, or None where every index holds it."""
    return AXIS_INDEX[rule.kind](rule, size, coords, linear, grid)


def _block_index(rule, size, coords, linear, grid):
    """Tile rows along rule.dim in `size` contiguous blocks; over a joint grid, this
    axis's digit of the joint block index."""
    joint = rule.joint or size
    return coords[rule.dim] * joint // max(grid[rule.dim], 1) // rule.inner % size


def _fold_index(rule, size, coords, linear, grid):
    block = coords[rule.dim] * 2 * size // max(grid[rule.dim], 1)
    return np.minimum(block, 2 * size - 1 - block)


# AxisRule.kind -> the tiles' indices along the axis (None: every index holds them)
AXIS_INDEX = {
    "replicate": lambda rule, size, coords, linear, grid: None,
    "block": _block_index,
    "cyclic": lambda rule, size, coords, linear, grid: (linear + rule.index) % size,
    "fixed": lambda rule, size, coords, linear, grid: rule.index,
    "fold": _fold_index,
}


def traffic_by_mesh_axis(plan, mesh, phases=None) -> dict:
    """Planned bytes sent per execute (all ranks), by the mesh axes along which sender
    and receiver differ: {"dp": ..., "tp": ..., "dp+tp": ...} (a message between ranks
    that differ along both axes counts under both names joined)."""
    from .instructions import Send
    if not isinstance(mesh, Mesh):   # a mesh dict, its options (cp_layout...) included
        from .presets import as_preset
        mesh = as_preset(mesh)
    names = [name for name, _ in mesh.axes]
    result = dict.fromkeys(names, 0)
    for rank, program in enumerate(plan.programs(phases)):
        here = np.unravel_index(rank, mesh.shape)
        for instruction in program:
            if type(instruction) is Send:
                there = np.unravel_index(instruction.peer, mesh.shape)
                axes = "+".join(n for n, a, b in zip(names, here, there) if a != b)
                result[axes] = result.get(axes, 0) + instruction.nbytes
    return result
