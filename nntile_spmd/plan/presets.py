"""Plan layer: distribution presets (single, DDP, FSDP, TP, PP, CP) that assign a
TileDistribution to every tensor from its role and axes, on any graph.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from .distribution import TileDistribution, folded_nodes
from .mesh import Mesh

PRESET_NAMES = ("single", "ddp", "fsdp", "tp")
PIPELINE_PRESET = "pp"   # every rank one stage: the mesh {"pp": world size}
CONTEXT_PRESET = "cp"    # every rank one block of the sequence: the mesh {"cp": world size}
SHARDED_ROLES = ("parameter", "gradient", "state", "constant")
MESH_OPTIONS = ("schedule", "cp_layout")   # keys of a mesh dict that are not axes


@dataclass(frozen=True)
class Preset:
    """A named preset, its split axis given as (tensor_name, dim) or derived, and
    per-tensor overrides {name: TileDistribution} applied on top.

    `nodes`: the plan's node count (None: the ranks). A multiple of the ranks is folded
    onto them: every distribution is computed for `nodes` nodes and node n runs on rank
    n % ranks (TileDistribution.owners), so the owners are those of the unfolded plan,
    modulo the ranks.

    `weight_dims` (tp only): split the axes of these dims of every weight (a parameter
    of two or more dims) instead of the derived ones (the seed's
    DistributionStrategy.tensor_parallel(world_size, dims))."""

    name: str
    axis: tuple | None = None
    overrides: dict = field(default_factory=dict, compare=False)
    nodes: int | None = None
    weight_dims: tuple | None = None

    def __post_init__(self):
        if self.name not in PRESET_NAMES + (PIPELINE_PRESET, CONTEXT_PRESET):
            raise ValueError(f"unknown distribution preset {self.name!r}; expected one of "
                             f"{PRESET_NAMES + (PIPELINE_PRESET, CONTEXT_PRESET)} or a dict of "
                             "TileDistribution")
        if self.nodes is not None and (isinstance(self.nodes, bool) or
                                       not isinstance(self.nodes, int) or self.nodes < 1):
            raise ValueError(f"preset {self.name!r}: nodes must be an int >= 1, "
                             f"got {self.nodes!r}")

    def plan_nodes(self, nranks) -> int:
        """The node count the owners are computed for (a multiple of `nranks`)."""
        return folded_nodes(self.nodes, nranks, f"preset {self.name!r}",
                            foldable=self.name not in (PIPELINE_PRESET, CONTEXT_PRESET))

    def rank_groups(self, nranks) -> tuple:
        """Rank sets that owner codes below REPLICATED name: none outside a mesh."""
        return ()

    def split_tiles(self, graph, class_of, classes) -> tuple:
        """No split axis needs more tiles than ranks (Mesh.split_tiles: zigzag cp)."""
        return ()

    def check_tilings(self, graph, class_of, classes, class_tilings, nranks):
        """The cp preset's sequence tiles (Mesh.check_tilings); nothing for the others."""
        if self.name == CONTEXT_PRESET:
            Mesh(((CONTEXT_PRESET, nranks),)).check_tilings(graph, class_of, classes,
                                                           class_tilings, nranks)

    @property
    def pipelined(self) -> bool:
        """Does the program walk micro-batches in pipeline order (plan/pipeline.py)?"""
        return self.name == PIPELINE_PRESET

    def one_f_one_b(self, graph):
        """None: the pp preset walks GPipe ({"pp": n, "schedule": "1f1b"} for 1F1B)."""
        return None

    def pipeline_mesh(self, nranks):
        """The pp preset as the mesh {"pp": nranks}; None for the other presets."""
        return Mesh(((PIPELINE_PRESET, nranks),)) if self.name == PIPELINE_PRESET else None

    def split_classes(self, graph, class_of, classes) -> frozenset:
        """The axis classes this preset blocks over ranks (none for single); for pp the
        batch axis, whose tiles are its micro-batches."""
        if self.name == PIPELINE_PRESET:
            return self.pipeline_mesh(1).split_classes(graph, class_of, classes)
        if self.name == CONTEXT_PRESET:
            return Mesh(((CONTEXT_PRESET, 1),)).split_classes(graph, class_of, classes)
        if self.name == "single":
            return frozenset()
        if self.axis is not None:
            return frozenset({class_of[tuple(self.axis)]})
        if self.weight_dims is not None:
            return weight_classes(graph, class_of, self.weight_dims)
        if self.name == "tp":
            return default_tp_classes(graph, class_of, classes)
        batch = default_batch_class(graph, class_of, classes)
        return frozenset() if batch is None else frozenset({batch})

    def split_ranks(self, graph, class_of, classes) -> dict:
        """{split class: ranks}: none, a preset blocks its axes over the whole world."""
        return {}

    def assign(self, graph, class_of, classes, nranks) -> dict:
        """TileDistribution for every tensor name, computed for plan_nodes() nodes."""
        nodes = self.plan_nodes(nranks)
        chosen = self.assign_nodes(graph, class_of, classes, nodes)
        return {name: planned_for(name, distribution, nodes, nranks)
                for name, distribution in chosen.items()}

    def assign_nodes(self, graph, class_of, classes, nranks) -> dict:
        split = self.split_classes(graph, class_of, classes)
        result, offsets = {}, {}
        if self.name == PIPELINE_PRESET:
            result = self.pipeline_mesh(nranks).assign(graph, class_of, classes, nranks)
        if self.name == CONTEXT_PRESET:
            result = Mesh(((CONTEXT_PRESET, nranks),)).assign(graph, class_of, classes, nranks)
        for tensor in graph.tensors():
            if tensor.name in result:
                continue
            dims = [class_of[(tensor.name, d)] for d in range(tensor.ndim)]
            result[tensor.name] = self.tensor_rule(tensor, dims, split, offsets, nranks)
        unknown = set(self.overrides) - set(result)
        if unknown:
            raise KeyError(f"distribution overrides name unknown tensors {sorted(unknown)}")
        return result | dict(self.overrides)

    def tensor_rule(self, tensor, dims, split, offsets, nranks):
        if self.name == "single":
            return TileDistribution.on_rank(0)
        blocked = [dim for dim, class_id in enumerate(dims) if class_id in split]
        if blocked:
            # (with several split axes, the innermost listed last wins)
            return TileDistribution.block_along_dim(blocked[-1])
        sharded = tensor.role in SHARDED_ROLES or tensor.copy_of is not None
        if self.name == "fsdp" and sharded and tensor.ndim > 0:
            # tensors on the same axes (a parameter, its gradient, its optimizer
            # state) share one offset so their tiles land together; the offsets
            # advance so small parameters do not all start on rank 0.
            key = tuple(dims)
            offsets.setdefault(key, len(offsets))
            return TileDistribution.round_robin(offset=offsets[key] % nranks)
        return TileDistribution.replicated()


def planned_for(name, distribution, nodes, nranks):
    """`distribution` computed for `nodes` (folded onto `nranks` ranks when more); the
    nodes a seed factory form states must be those."""
    try:
        stamped = distribution.for_nodes(nodes)
    except ValueError as error:
        raise ValueError(f"tensor {name!r}: {error}") from None
    return stamped if nodes != nranks else distribution


def default_batch_class(graph, class_of, classes):
    """The axis of the trailing dim shared by most input tensors (batch is trailing)."""
    votes = Counter(class_of[(t.name, t.ndim - 1)] for t in graph.tensors()
                    if t.role == "input" and t.ndim > 0)
    candidates = [c for c, _ in votes.most_common() if not classes[c].whole]
    return candidates[0] if candidates else None


def weight_classes(graph, class_of, dims) -> frozenset:
    """The axes of dims `dims` of every weight (a parameter of two or more dims)."""
    split = frozenset(class_of[(t.name, d)] for t in graph.tensors()
                      if t.role == "parameter" and t.ndim >= 2 for d in dims if d < t.ndim)
    if not split:
        raise ValueError(f"tensor_parallel(dims={list(dims)}): no weight of graph "
                         f"{graph.name!r} has such a dim")
    return split


def default_tp_classes(graph, class_of, classes) -> frozenset:
    """The axes of the dims a model marked with `tensor.split_for_tp(dim)`, if any;
    else Megatron-style hidden axes: walking the weights in program order, a
    weight none of whose axes is split yet gets its first axis split that no
    input touches. An MLP's w1 [H, D] splits H (column-parallel), w2 [C, H] is then
    row-parallel on H; the next pair splits its own inner axis, and axes shared with
    the inputs (features, a residual stream) stay whole. Without such an axis: the
    axis most parameters share.
    """
    marked = {class_of[(t.name, t.parallel_dim)] for t in graph.tensors()
              if t.parallel_dim is not None}
    if marked:
        return frozenset(marked)
    input_classes = {class_of[(t.name, d)] for t in graph.tensors() if t.role == "input"
                     for d in range(t.ndim)}
    split, votes = set(), Counter()
    for tensor in graph.tensors():
        if tensor.role != "parameter":
            continue
        axes = [class_of[(tensor.name, d)] for d in range(tensor.ndim)]
        votes.update(set(axes))
        if tensor.ndim < 2:
            continue   # biases and norms follow the weights they belong to
        free = [c for c in axes if c not in input_classes and not classes[c].whole]
        if free and not split.intersection(axes):
            split.add(free[0])
    if split:
        return frozenset(split)
    ranked = sorted((c for c in votes if not classes[c].whole),
                    key=lambda c: (-votes[c], -classes[c].size, c))
    if ranked:
        return frozenset(ranked[:1])
    batch = default_batch_class(graph, class_of, classes)
    return frozenset() if batch is None else frozenset({batch})


def as_preset(distribution) -> Preset | Mesh:
    """Accept a preset name, a Preset, a Mesh, a mesh as {axis: size} ({"dp": 2, "tp": 2};
    with a pp axis optionally "schedule": "gpipe" or "1f1b", with a cp axis "cp_layout":
    "contiguous" or "zigzag"), or a dict of per-tensor
    overrides {name: TileDistribution} on 'single'."""
    if isinstance(distribution, (Preset, Mesh)):
        return distribution
    if isinstance(distribution, str):
        return Preset(distribution)
    if isinstance(distribution, dict):
        sizes = [v for v in distribution.values() if not isinstance(v, TileDistribution)]
        if sizes:
            if len(sizes) < len(distribution):
                raise ValueError(f"distribution {distribution!r} mixes mesh axis sizes and "
                                 "per-tensor TileDistributions; pass one or the other")
            axes = {k: v for k, v in distribution.items() if k not in MESH_OPTIONS}
            return Mesh(tuple(axes.items()), distribution.get("schedule", "gpipe"),
                        distribution.get("cp_layout", "contiguous"))
        return Preset("single", overrides=dict(distribution))
    raise TypeError(f"distribution must be a preset name, Preset or dict, got "
                    f"{type(distribution).__name__}")
