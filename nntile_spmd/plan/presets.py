"""Plan layer: distribution presets (single, DDP, FSDP, TP) that assign a
TileDistribution to every tensor from its role and axes, on any graph.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from .distribution import TileDistribution

PRESET_NAMES = ("single", "ddp", "fsdp", "tp")
SHARDED_ROLES = ("parameter", "gradient", "state", "constant")


@dataclass(frozen=True)
class Preset:
    """A named preset, its split axis given as (tensor_name, dim) or derived, and
    per-tensor overrides {name: TileDistribution} applied on top."""

    name: str
    axis: tuple | None = None
    overrides: dict = field(default_factory=dict, compare=False)

    def __post_init__(self):
        if self.name not in PRESET_NAMES:
            raise ValueError(f"unknown distribution preset {self.name!r}; expected one of "
                             f"{PRESET_NAMES} or a dict of TileDistribution")

    def split_class(self, graph, class_of, classes):
        """The axis class this preset blocks over ranks (None for single)."""
        if self.name == "single":
            return None
        if self.axis is not None:
            return class_of[tuple(self.axis)]
        if self.name == "tp":
            return default_tp_class(graph, class_of, classes)
        return default_batch_class(graph, class_of, classes)

    def assign(self, graph, class_of, classes, nranks) -> dict:
        """TileDistribution for every tensor name."""
        split = self.split_class(graph, class_of, classes)
        result, offsets = {}, {}
        for tensor in graph.tensors():
            dims = [class_of[(tensor.name, d)] for d in range(tensor.ndim)]
            result[tensor.name] = self.tensor_rule(tensor, dims, split, offsets, nranks)
        unknown = set(self.overrides) - set(result)
        if unknown:
            raise KeyError(f"distribution overrides name unknown tensors {sorted(unknown)}")
        return result | dict(self.overrides)

    def tensor_rule(self, tensor, dims, split, offsets, nranks):
        if self.name == "single":
            return TileDistribution.on_rank(0)
        if split in dims:
            return TileDistribution.block_along_dim(dims.index(split))
        if self.name == "fsdp" and tensor.role in SHARDED_ROLES and tensor.ndim > 0:
            # tensors on the same axes (a parameter, its gradient, its optimizer
            # state) share one offset so their tiles land together; the offsets
            # advance so small parameters do not all start on rank 0.
            key = tuple(dims)
            offsets.setdefault(key, len(offsets))
            return TileDistribution.round_robin(offsets[key] % nranks)
        return TileDistribution.replicated()


def default_batch_class(graph, class_of, classes):
    """The axis of the trailing dim shared by most input tensors (batch is trailing)."""
    votes = Counter(class_of[(t.name, t.ndim - 1)] for t in graph.tensors()
                    if t.role == "input" and t.ndim > 0)
    candidates = [c for c, _ in votes.most_common() if not classes[c].whole]
    return candidates[0] if candidates else None


def default_tp_class(graph, class_of, classes):
    """The axis shared by most parameters (an MLP's hidden dim, attention heads)."""
    votes = Counter()
    for tensor in graph.tensors():
        if tensor.role == "parameter":
            votes.update({class_of[(tensor.name, d)] for d in range(tensor.ndim)})
    ranked = sorted((c for c in votes if not classes[c].whole),
                    key=lambda c: (-votes[c], -classes[c].size, c))
    return ranked[0] if ranked else default_batch_class(graph, class_of, classes)


def as_preset(distribution) -> Preset:
    """Accept a preset name, a Preset, or a dict of per-tensor overrides on 'single'."""
    if isinstance(distribution, Preset):
        return distribution
    if isinstance(distribution, str):
        return Preset(distribution)
    if isinstance(distribution, dict):
        return Preset("single", overrides=dict(distribution))
    raise TypeError(f"distribution must be a preset name, Preset or dict, got "
                    f"{type(distribution).__name__}")
