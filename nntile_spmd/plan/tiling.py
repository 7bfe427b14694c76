"""Plan layer: how each axis class is cut into tiles (DimensionTiling) and the
strategies that choose those cuts. Pure functions of the graph; no MPI.
"""

from __future__ import annotations

import bisect
import itertools
from dataclasses import dataclass, field
from functools import cached_property
from numbers import Integral

from ..graph.dtypes import ITEMSIZE
from .device_profile import device_profile
from .tile_budget import device_target, human, sized_target


@dataclass(frozen=True)
class DimensionTiling:
    """Tile boundaries along one axis: tile i spans [boundaries[i], boundaries[i+1])."""

    boundaries: tuple

    def __post_init__(self):
        bounds = self.boundaries
        if len(bounds) < 2 or bounds[0] != 0 or any(b <= a for a, b in zip(bounds, bounds[1:])):
            raise ValueError(f"bad tile boundaries {list(bounds)}: need 0 = b0 < b1 < ...")

    @classmethod
    def uniform(cls, size: int, tile: int) -> DimensionTiling:
        """Tiles of `tile` elements; the last one may be shorter."""
        if tile <= 0:
            raise ValueError(f"tile size must be positive, got {tile}")
        return cls(tuple(range(0, size, tile)) + (size,))

    @classmethod
    def explicit(cls, boundaries) -> DimensionTiling:
        """Tiles between the given boundaries (0 first, the axis size last)."""
        return cls(tuple(int(b) for b in boundaries))

    @classmethod
    def proportional(cls, size: int, weights) -> DimensionTiling:
        """One tile per weight, sizes proportional to the weights (at least 1 each)."""
        if size < len(weights):
            raise ValueError(f"cannot cut {size} elements into {len(weights)} tiles")
        total = float(sum(weights))
        cuts = [round(size * acc / total) for acc in itertools.accumulate(weights)]
        bounds = [0]
        for index, cut in enumerate(cuts):
            remaining = len(weights) - index - 1
            bounds.append(min(max(cut, bounds[-1] + 1), size - remaining))
        return cls(tuple(bounds))

    @property
    def size(self) -> int:
        return self.boundaries[-1]

    @property
    def num_tiles(self) -> int:
        return len(self.boundaries) - 1

    def tile_size(self, index: int) -> int:
        return self.boundaries[index + 1] - self.boundaries[index]

    @cached_property
    def sizes(self) -> tuple:
        """Every tile's size (computed once: a batch axis of 1,024 ranks has as many)."""
        return tuple(high - low for low, high in zip(self.boundaries, self.boundaries[1:]))

    def tile_of(self, position: int) -> int:
        """Index of the tile holding element `position`."""
        return bisect.bisect_right(self.boundaries, position) - 1

    def __repr__(self) -> str:
        sizes = set(self.sizes[:-1])   # all but the last tile
        if len(sizes) <= 1:
            return f"T({self.size}/{self.tile_size(0)})"
        return f"T{list(self.boundaries)}"


@dataclass(frozen=True)
class TilingSpec:
    """The tiling of one tensor: one DimensionTiling per dim."""

    dims: tuple

    @property
    def grid(self) -> tuple:
        return tuple(dim.num_tiles for dim in self.dims)

    def tile_shape(self, coord) -> tuple:
        return tuple(dim.tile_size(i) for dim, i in zip(self.dims, coord))

    def tile_offset(self, coord) -> tuple:
        return tuple(dim.boundaries[i] for dim, i in zip(self.dims, coord))

    def tile_slices(self, coord) -> tuple:
        return tuple(slice(dim.boundaries[i], dim.boundaries[i + 1])
                     for dim, i in zip(self.dims, coord))

    def coords(self):
        """All tile coordinates, first dim fastest (column-major like the data)."""
        return [tuple(reversed(c)) for c in itertools.product(*(range(n) for n in
                                                                reversed(self.grid)))]

    @property
    def tile_shape_max(self) -> tuple:
        return tuple(max(dim.tile_size(i) for i in range(dim.num_tiles)) for dim in self.dims)

    def __repr__(self) -> str:
        return "[" + ", ".join(map(repr, self.dims)) + "]"


@dataclass(frozen=True)
class DevicePerformanceProfile:
    """Relative speed of each rank (e.g. [1, 1, 2] when rank 2 is twice as fast)."""

    relative_speeds: tuple

    def weights(self, nranks: int) -> tuple:
        if len(self.relative_speeds) != nranks:
            raise ValueError(f"profile has {len(self.relative_speeds)} speeds for {nranks} ranks")
        return tuple(float(s) for s in self.relative_speeds)


@dataclass(frozen=True)
class TilingRequest:
    """What compile() asks of a strategy: the classes, and which to split over ranks."""

    classes: tuple
    class_of: dict
    graph: object
    nranks: int
    split_classes: frozenset   # classes a preset blocks over ranks
    split_tiles: tuple = ()    # ((class id, tiles), ...): a split class needing more tiles
                               # than ranks (a zigzag cp axis: 2 per cp rank)
    # {class: ranks along the mesh axis that blocks it}; a class not named here is
    # blocked over the whole world (presets). A mesh's tp axis blocks the hidden axes
    # over its t ranks only: cut into N tiles instead, a weight's tiles and tasks per
    # rank grew with the world at a fixed t.
    split_ranks: dict = field(default_factory=dict, compare=False)

    def split_over(self, class_id) -> int:
        """How many ranks the preset or mesh blocks split class `class_id` over."""
        return self.split_ranks.get(class_id, self.nranks)

    def tiles_of_split(self, class_id) -> int:
        """How many tiles auto tiling cuts a split class into at least: one per rank
        blocking it, more where the layout asks (zigzag cp)."""
        return max([self.split_over(class_id)] + [n for c, n in self.split_tiles
                                                  if c == class_id])


def is_int(value) -> bool:
    return isinstance(value, Integral) and not isinstance(value, bool)


# TilingStrategy size argument -> may it be None; each must be a positive int (a float
# was taken as is: min_tile=2.5 gave tiles of any size). A target of None is sized by
# the tasks it makes per rank (plan/tile_budget.py).
SIZE_ARGUMENTS = {"target_tile_bytes": True, "min_tile": False, "max_tile": True}


def check_sizes(**sizes) -> None:
    for name, value in sizes.items():
        if value is None and SIZE_ARGUMENTS[name]:
            continue
        if not is_int(value) or value < 1:
            also = " or None" if SIZE_ARGUMENTS[name] else ""
            raise TypeError(f"TilingStrategy: {name} must be a positive int{also}, "
                            f"got {value!r}")


def check_tile_shape(kind, name, tile_shape) -> None:
    """Per dim a tile size (an int), a list of int boundaries, or None: a float size
    (2.5) was refused with "'float' object is not iterable" and float boundaries were
    truncated without a word."""
    if isinstance(tile_shape, (str, bytes)) or not hasattr(tile_shape, "__iter__"):
        raise TypeError(f"TilingStrategy.{kind}: the tile shape of {name!r} must be a list "
                        f"with one entry per dim, got {tile_shape!r}")
    for dim, tile in enumerate(tile_shape):
        boundaries = not isinstance(tile, (str, bytes)) and hasattr(tile, "__iter__") and \
            all(is_int(bound) for bound in tile)
        if tile is not None and not is_int(tile) and not boundaries:
            raise TypeError(f"TilingStrategy.{kind}: {name!r} dim {dim}: a tile must be a "
                            f"size (an int), a list of int boundaries or None, got {tile!r}")


class TilingStrategy:
    """Chooses one DimensionTiling per axis class. Build with .auto/.manual/..."""

    def __init__(self, kind, manual=None, target_tile_bytes=1 << 20, min_tile=1,
                 max_tile=None, profile=None, device=None):
        check_sizes(target_tile_bytes=target_tile_bytes, min_tile=min_tile, max_tile=max_tile)
        if not isinstance(manual or {}, dict):
            raise TypeError(f"TilingStrategy.{kind}: tile shapes must be a dict "
                            f"{{tensor name: [per dim ...]}}, got {manual!r}")
        for name, tile_shape in (manual or {}).items():
            check_tile_shape(kind, name, tile_shape)
        self.kind = kind
        self.manual_shapes = dict(manual or {})
        # no target given: 1 MiB, doubled while the tasks per rank exceed a budget
        self.sized = target_tile_bytes is None
        self.target_tile_bytes = 1 << 20 if self.sized else target_tile_bytes
        self.min_tile = min_tile
        self.max_tile = max_tile
        self.profile = profile
        # the device planned for (plan/device_profile.py): on a GPU an unsized target
        # means tiles as large as the distribution allows
        self.device = None if device is None else device_profile(device)

    @classmethod
    def auto(cls, target_tile_bytes: int | None = None, min_tile: int = 1, max_tile=None,
             device=None):
        """Tiles near `target_tile_bytes`; axes a preset splits get >= 1 tile per rank.
        Without a target: 1 MiB, doubled until the tasks per rank fit a budget; for a
        GPU `device` ("cuda", "h100", a DeviceProfile) as large as the distribution
        allows (plan/tile_budget.py)."""
        return cls("auto", target_tile_bytes=target_tile_bytes, min_tile=min_tile,
                   max_tile=max_tile, device=device)

    @classmethod
    def auto_tiling(cls, target_tile_bytes: int | None = None, min_tile: int = 1,
                    max_tile=None, device=None):
        """The seed's name of auto()."""
        return cls.auto(target_tile_bytes, min_tile, max_tile, device)

    @classmethod
    def manual(cls, tile_shapes: dict):
        """Tile shape per named tensor; axes nobody names stay whole (one tile)."""
        return cls("manual", manual=tile_shapes)

    @classmethod
    def constrained(cls, tile_shapes: dict, target_tile_bytes: int = 1 << 20,
                    min_tile: int = 1, max_tile=None):
        """The named tensors' tile shapes are fixed; other axes are chosen as by auto."""
        return cls("constrained", manual=tile_shapes, target_tile_bytes=target_tile_bytes,
                   min_tile=min_tile, max_tile=max_tile)

    @classmethod
    def explicit(cls, boundaries: dict, target_tile_bytes: int = 1 << 20, min_tile: int = 1,
                 max_tile=None):
        """Exact tile boundaries per named tensor, {name: [dim 0, dim 1, ...]}, each dim
        a boundary list [0, b1, ..., size], a tile size, or None; the axes left free
        are chosen as by auto, so every preset still splits its axes over the ranks."""
        return cls("explicit", manual=boundaries, target_tile_bytes=target_tile_bytes,
                   min_tile=min_tile, max_tile=max_tile)

    @classmethod
    def load_balanced(cls, profile: DevicePerformanceProfile, target_tile_bytes=1 << 20):
        """Axes a preset splits get one tile per rank sized by rank speed; others auto."""
        return cls("load_balanced", target_tile_bytes=target_tile_bytes, profile=profile)

    def __repr__(self) -> str:
        if self.kind in ("manual", "explicit"):
            return f"TilingStrategy.{self.kind}({self.manual_shapes})"
        target = "sized" if self.sized else self.target_tile_bytes
        device = "" if self.device is None else f", device={self.device.name}"
        return f"TilingStrategy.{self.kind}(target_tile_bytes={target}{device})"

    def resolve(self, request: TilingRequest) -> dict:
        """Map class id -> DimensionTiling."""
        return self.resolve_explained(request)[0]

    def resolve_explained(self, request: TilingRequest) -> tuple:
        """(class id -> DimensionTiling, lines saying why: the target, then per class)."""
        if self.sized and self.device is not None and self.device.whole_tiles:
            target, note = device_target(self.device)
            chosen, reasons = self.resolve_at(request, target)
            return chosen, [note] + reasons
        if self.sized and self.kind != "manual":
            return sized_target(lambda target: self.resolve_at(request, target), request,
                                self.target_tile_bytes)[1:]
        chosen, reasons = self.resolve_at(request, self.target_tile_bytes)
        head = "manual tile shapes" if self.kind == "manual" else \
            f"target {human(self.target_tile_bytes)} (given)"
        return chosen, [head] + reasons

    def resolve_at(self, request, target) -> tuple:
        """The tilings for one target tile size, and a reason per axis class."""
        chosen = manual_tilings(request, self.manual_shapes)
        reasons = dict.fromkeys(chosen, "given by the tiling's tile shapes")
        if self.kind == "load_balanced":
            weights = self.profile.weights(request.nranks)
            for class_id in sorted(request.split_classes - set(chosen)):
                size = request.classes[class_id].size
                if size >= request.nranks and not request.classes[class_id].whole:
                    chosen[class_id] = DimensionTiling.proportional(size, weights)
                    reasons[class_id] = "one tile per rank, sized by rank speed"
        if self.kind != "manual":
            auto_tilings(request, chosen, self, target, reasons)
        for axis_class in request.classes:
            chosen.setdefault(axis_class.id, DimensionTiling.uniform(axis_class.size,
                                                                     axis_class.size))
            reasons.setdefault(axis_class.id, "whole: no tile shape names it")
        return chosen, [f"{request.classes[class_id]!r} {chosen[class_id]!r}: {reason}"
                        for class_id, reason in sorted(reasons.items())]


def manual_tilings(request, tile_shapes) -> dict:
    """Tilings from user tile shapes (per dim a tile size, a boundary list, or None
    for a free axis); two requests for one axis must agree."""
    chosen, source = {}, {}
    for name, tile_shape in tile_shapes.items():
        tensor = request.graph.get_tensor(name)
        if len(tile_shape) != tensor.ndim:
            raise ValueError(f"tiling of {tensor.describe()}: tile shape {list(tile_shape)} "
                             f"has {len(tile_shape)} dims")
        for dim, tile in enumerate(tile_shape):
            if tile is None:
                continue
            axis_class = request.classes[request.class_of[(name, dim)]]
            tiling = requested_tiling(tensor, dim, tile, axis_class.size)
            if axis_class.whole and tiling.num_tiles > 1:
                raise ValueError(f"tiling of {name} dim {dim}: this axis must stay whole "
                                 f"(an op reduces over it in one piece)")
            previous = chosen.get(axis_class.id)
            if previous is not None and previous != tiling:
                other_name, other_dim = source[axis_class.id]
                raise ValueError(f"conflicting tilings of one axis: {other_name} dim "
                                 f"{other_dim} asks {previous}, {name} dim {dim} asks {tiling}")
            chosen[axis_class.id], source[axis_class.id] = tiling, (name, dim)
    return chosen


def requested_tiling(tensor, dim, tile, size) -> DimensionTiling:
    """One dim's request: a tile size (uniform tiles) or explicit boundaries."""
    if isinstance(tile, Integral):
        return DimensionTiling.uniform(size, min(int(tile), size))
    try:
        tiling = DimensionTiling.explicit(tile)
    except (TypeError, ValueError) as error:
        raise ValueError(f"tiling of {tensor.describe()} dim {dim}: {error}") from None
    if tiling.size != size:
        raise ValueError(f"tiling of {tensor.describe()} dim {dim}: boundaries "
                         f"{list(tiling.boundaries)} must end at the axis size {size}")
    return tiling


def auto_tilings(request, chosen, strategy, target, reasons):
    """Halve the largest free axis of the biggest tensors until tiles near the target."""
    tensors = sorted(request.graph.tensors(), key=lambda t: (-t.nbytes, t.id))
    sizes, halved_for = {}, {}
    for tensor in tensors:
        if tensor.ndim == 0:
            continue
        ids = [request.class_of[(tensor.name, dim)] for dim in range(tensor.ndim)]
        for class_id in ids:
            if class_id not in chosen and class_id not in sizes:
                axis_class = request.classes[class_id]
                sizes[class_id] = axis_class.size
                if strategy.max_tile and not axis_class.whole:
                    sizes[class_id] = min(axis_class.size, strategy.max_tile)
                if strategy.sized and class_id in request.split_classes:
                    # a rank's tile of the split axis, so the other axes are cut alike
                    # at every world size (an explicit target keeps the whole axis)
                    share = -(-axis_class.size // request.tiles_of_split(class_id))
                    sizes[class_id] = min(sizes[class_id], share)
        shrink_to_target(request, tensor, ids, chosen, sizes, strategy, target, halved_for)
    for class_id, tile in sizes.items():
        axis_class = request.classes[class_id]
        split = class_id in request.split_classes and not axis_class.whole
        over, wanted = request.split_over(class_id), request.tiles_of_split(class_id)
        if split:
            tile = min(tile, -(-axis_class.size // wanted))
        reasons[class_id] = class_reason(axis_class, split, over,
                                         halved_for.get(class_id), target)
        chosen[class_id] = DimensionTiling.uniform(axis_class.size, max(tile, 1))
        if split and chosen[class_id].num_tiles < min(wanted, axis_class.size):
            # tiles of ceil(size / ranks) can be too few (30 over 7 ranks: tiles
            # of 5 make 6), leaving a rank with no share of the split axis; cut
            # balanced tiles instead
            chosen[class_id] = DimensionTiling.proportional(axis_class.size,
                                                            [1] * wanted)


def class_reason(axis_class, split, nranks, halved_for, target) -> str:
    """Why auto tiling cut an axis class as it did (dump_plan's tiling lines)."""
    if split:
        return f"split over the {nranks} rank(s): the preset's axis"
    if axis_class.whole:
        return "whole: an op reduces over it in one piece"
    if halved_for is not None:
        return f"halved to bring {halved_for} near {human(target)} tiles"
    return f"whole: its tensors' tiles are within {human(target)} without cutting it"


def shrink_to_target(request, tensor, ids, chosen, sizes, strategy, target, halved_for):
    def tile_bytes():
        count = ITEMSIZE[tensor.dtype]
        for class_id in ids:
            count *= chosen[class_id].tile_size(0) if class_id in chosen else sizes[class_id]
        return count

    while tile_bytes() > target:
        free = [c for c in ids if c not in chosen and not request.classes[c].whole
                and sizes[c] // 2 >= strategy.min_tile]
        if not free:
            return
        largest = max(free, key=lambda c: (sizes[c], -c))
        sizes[largest] = -(-sizes[largest] // 2)
        halved_for.setdefault(largest, tensor.describe())
