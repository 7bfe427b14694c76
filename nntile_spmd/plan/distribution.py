"""Plan layer: which rank owns each tile. A TileDistribution is a formula from tile
coordinate to rank (or REPLICATED), so every rank derives every owner alone.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace
from typing import NamedTuple

import numpy as np

REPLICATED = -1
# an AxisRule's tuple spellings: (kind, number of arguments) -> the fields they set
AXIS_RULE_SPELLINGS = {
    ("replicate", 0): (),
    ("block", 1): ("dim",),
    ("block", 3): ("dim", "inner", "joint"),
    ("cyclic", 1): ("index",),
    ("fixed", 1): ("index",),
    ("fold", 1): ("dim",),
}


class AxisRule(NamedTuple):
    """How one mesh axis places a tensor's tiles (plan/mesh.py's axis_index reads it).

    Spelled as a tuple in TileDistribution.mesh_layout: ("replicate",) every index
    holds the tile; ("block", dim) tile rows along `dim` cut into the axis's size
    contiguous blocks; ("block", dim, inner, joint) the same over a joint grid of
    `joint` blocks shared with the axes inside it (`inner` blocks of theirs per block
    of this axis: HSDP's dp x fsdp), this axis taking the high digit; ("cyclic", index)
    tile t at (t + index) % size; ("fixed", index) every tile at one index (a pipeline
    stage); ("fold", dim) 2 x size blocks along `dim`, block j with block
    2 size - 1 - j (zigzag)."""

    kind: str
    dim: int | None = None     # block, fold: the tensor dim the axis cuts
    index: int = 0             # cyclic: the offset of tile 0; fixed: the one index
    inner: int = 1             # block over a joint grid: the inner axes' blocks ...
    joint: int | None = None   # ... and the joint grid's (None: the axis alone)

    @classmethod
    def parse(cls, rule) -> AxisRule:
        """An AxisRule from its tuple spelling (an AxisRule stays as it is)."""
        if isinstance(rule, AxisRule):
            return rule
        kind, *args = rule
        fields = AXIS_RULE_SPELLINGS.get((kind, len(args)))
        if fields is None:
            raise ValueError(f"mesh axis rule {tuple(rule)!r}: expected one of "
                             f"{', '.join(spelling_pattern(key) for key in AXIS_RULE_SPELLINGS)}")
        return cls(kind, **{name: int(arg) for name, arg in zip(fields, args)})

    def spelling(self) -> tuple:
        """The tuple that parse() reads back: the rule as users write it."""
        arguments = 3 if self.joint is not None else 0 if self.kind == "replicate" else 1
        return (self.kind, *(getattr(self, name)
                             for name in AXIS_RULE_SPELLINGS[self.kind, arguments]))


def spelling_pattern(key) -> str:
    """A tuple spelling as the error shows it: ('block', dim)."""
    fields = AXIS_RULE_SPELLINGS[key]
    return f"({key[0]!r}, {', '.join(fields)})" if fields else f"({key[0]!r},)"


class MeshLayout(NamedTuple):
    """A mesh layout's mesh shape and one AxisRule per mesh axis."""

    shape: tuple
    rules: tuple


def group_code(index):
    """The owner code of mesh group `index`: codes below REPLICATED name groups (an int
    or a NumPy array of them)."""
    return -2 - index


def group_of(code):
    """The index of the mesh group that owner code `code` (below REPLICATED) names."""
    return -2 - code


@dataclass(frozen=True)
class TileDistribution:
    """Tile -> owner rank formula. Build with the factory classmethods."""

    kind: str
    dim: int | None = None
    rank: int | None = None
    weights: tuple | None = None
    offset: int = 0
    function: object = field(default=None, compare=False)
    owner_list: tuple | None = None    # custom(owners): ranks in column-major tile order
    mesh: MeshLayout | None = None     # mesh_layout: its shape and one rule per mesh axis
    # the plan's node count the owners are computed for (the seed's round_robin(num_nodes),
    # block_along_dim(..., num_nodes=...); a preset's plan_nodes); None: the plan's
    # ranks. More nodes than ranks are folded onto them (owners())
    nodes: int | None = None
    grid_shape: tuple | None = field(default=None, compare=False)

    @classmethod
    def round_robin(cls, num_nodes: int | None = None, *, offset: int = 0) -> TileDistribution:
        """Tile number t (column-major order) goes to rank (t + offset) % nranks;
        `num_nodes`, if given, must be the plan's number of nodes (the seed's form)."""
        return cls("round_robin", offset=offset, nodes=checked_count("round_robin", num_nodes))

    @classmethod
    def block(cls) -> TileDistribution:
        """Tiles in column-major order cut into nranks contiguous runs."""
        return cls("block")

    @classmethod
    def block_along_dim(cls, dim: int | None = None, *, grid_shape=None,
                        num_nodes: int | None = None) -> TileDistribution:
        """Tile rows along `dim` cut into nranks contiguous blocks (other dims ignored).
        The seed's form block_along_dim(grid_shape=[1, 8], dim=1, num_nodes=8) also
        states the tensor's tile grid and the ranks, checked against the plan."""
        if dim is None and grid_shape is None:
            raise TypeError("block_along_dim: give the dim to block along")
        grid = None if grid_shape is None else tuple(int(n) for n in grid_shape)
        return cls("block_along_dim", dim=dim, grid_shape=grid,
                   nodes=checked_count("block_along_dim", num_nodes))

    @classmethod
    def custom(cls, owners) -> TileDistribution:
        """The owner rank of every tile in column-major tile order (NNTile
        2.0's `std::vector<int> owners`; REPLICATED = -1 allowed), or a function
        (tile_coord, grid_shape, nranks) -> rank (or REPLICATED)."""
        if callable(owners):
            return cls("custom", function=owners)
        if isinstance(owners, np.ndarray):
            owners = owners.reshape(-1, order="F").tolist()
        try:
            ranks = tuple(int(owner) for owner in owners)
            exact = all(rank == owner for rank, owner in zip(ranks, owners))
        except (TypeError, ValueError):
            ranks, exact = (), False
        if not exact or isinstance(owners, (str, bytes)) or \
                any(isinstance(owner, bool) for owner in owners):
            raise TypeError(f"TileDistribution.custom: expected a function or a list of "
                            f"integer ranks, got {owners!r}")
        return cls("custom", owner_list=ranks)

    @classmethod
    def mesh_layout(cls, shape: tuple, rules: tuple) -> TileDistribution:
        """Placement on a device mesh of `shape` (plan/mesh.py): one AxisRule (or its
        tuple spelling: ("block", dim), ("cyclic", offset), ("replicate",), ...) per
        mesh axis. Tiles held by a proper sub-grid get a group code below REPLICATED
        (plan.mesh.mesh_groups)."""
        rules = tuple(AxisRule.parse(rule) for rule in rules)
        if len(rules) != len(shape):
            raise ValueError(f"mesh layout of {len(shape)} axes given {len(rules)} rules")
        return cls("mesh", mesh=MeshLayout(tuple(shape), rules))

    @classmethod
    def replicated(cls) -> TileDistribution:
        """Every rank holds and computes every tile."""
        return cls("replicated")

    @classmethod
    def on_rank(cls, rank: int) -> TileDistribution:
        """Every tile on one rank."""
        return cls("on_rank", rank=rank)

    @classmethod
    def load_balanced(cls, weights) -> TileDistribution:
        """Like block, but rank r gets a share of tiles proportional to weights[r]."""
        return cls("load_balanced", weights=tuple(float(w) for w in weights))

    def __repr__(self) -> str:
        detail = {"round_robin": f"offset={self.offset}" if self.offset else "",
                  "block_along_dim": f"dim={self.dim}", "on_rank": f"{self.rank}",
                  "load_balanced": f"{list(self.weights or ())}",
                  "custom": custom_detail(self), "mesh": mesh_detail(self)}.get(self.kind, "")
        return f"{self.kind}({detail})"

    def owners(self, grid: tuple, nranks: int) -> np.ndarray:
        """Array of the grid's shape holding each tile's owner (REPLICATED = -1).

        A distribution made for `nodes` nodes, a multiple of the plan's ranks, is
        folded: its owners are computed for the nodes, and node n runs on rank
        n % nranks (each rank hosts nodes / nranks of them)."""
        nodes = self.plan_nodes(nranks)
        self.check_stated(grid)
        count = int(np.prod(grid, dtype=np.int64))
        linear = np.arange(count).reshape(grid, order="F") if grid else np.zeros((), int)
        rule = OWNER_RULES[self.kind]
        result = np.asarray(rule(self, linear, grid, nodes), dtype=np.int64)
        result = np.broadcast_to(result, grid).copy() if grid else result.reshape(())
        lowest = REPLICATED if self.kind != "mesh" else -(1 << 62)   # mesh: group codes
        if ((result < lowest) | (result >= nodes)).any():
            raise ValueError(f"distribution {self} gives ranks outside 0..{nodes - 1}")
        return np.where(result >= 0, result % nranks, result) if nodes != nranks else result

    def plan_nodes(self, nranks) -> int:
        """The nodes the owners are computed for: those stated, else the plan's ranks."""
        return folded_nodes(self.nodes, nranks, str(self), foldable=self.kind != "mesh")

    def check_stated(self, grid):
        """The tile grid the seed's factory form states must be the tensor's."""
        if self.grid_shape is not None and self.grid_shape != tuple(grid):
            raise ValueError(f"{self} states a tile grid {list(self.grid_shape)}, the "
                             f"tensor's tiling gives {list(grid)}")

    def for_nodes(self, nodes: int) -> TileDistribution:
        """This distribution computed for a plan of `nodes` nodes (the ranks it states,
        if any, must be those)."""
        if self.nodes is None:
            return replace(self, nodes=nodes)
        if self.nodes != nodes:
            raise ValueError(f"{self} was made for {self.nodes} nodes, the plan has "
                             f"{nodes} node(s)")
        return self


def checked_count(factory, num_nodes):
    """`num_nodes` of a factory's seed form: None or an int >= 1."""
    if num_nodes is None:
        return None
    if isinstance(num_nodes, bool) or not isinstance(num_nodes, int) or num_nodes < 1:
        raise ValueError(f"TileDistribution.{factory}: num_nodes must be an int >= 1, "
                         f"got {num_nodes!r}")
    return num_nodes


def _blocks(index, count, nranks):
    return (index * nranks) // max(count, 1)


def _along_dim(spec, linear, grid, nranks):
    if not grid:
        return 0
    dim = spec.dim if spec.dim is not None else len(grid) - 1
    if not 0 <= dim < len(grid):
        raise ValueError(f"block_along_dim({dim}) on a tensor with {len(grid)} dims")
    coords = np.indices(grid)[dim]
    return _blocks(coords, grid[dim], nranks)


def _load_balanced(spec, linear, grid, nranks):
    if len(spec.weights) != nranks:
        raise ValueError(f"load_balanced has {len(spec.weights)} weights for {nranks} ranks")
    count = linear.size
    edges = np.cumsum(spec.weights) / sum(spec.weights) * count
    return np.searchsorted(edges, linear + 0.5)


def custom_detail(spec) -> str:
    if spec.owner_list is None:
        return getattr(spec.function, "__name__", "fn")
    shown = list(spec.owner_list[:8])
    return f"{shown}"[:-1] + (", ...]" if len(spec.owner_list) > 8 else "]")


def mesh_detail(spec) -> str:
    if spec.mesh is None:
        return ""
    return ", ".join(f"{size}:" + " ".join(str(part) for part in rule.spelling())
                     for size, rule in zip(*spec.mesh))


def _mesh(spec, linear, grid, nranks):
    from .mesh import mesh_owners   # mesh.py builds TileDistributions: import when used
    return mesh_owners(spec, linear, grid, nranks)


def _custom(spec, linear, grid, nranks):
    if spec.owner_list is not None:
        if len(spec.owner_list) != linear.size:
            raise ValueError(f"custom distribution lists {len(spec.owner_list)} owners for "
                             f"a grid of {list(grid)} = {linear.size} tiles")
        return np.array(spec.owner_list, dtype=np.int64)[linear]
    result = np.empty(grid, dtype=np.int64)
    for coord in itertools.product(*(range(n) for n in grid)):
        result[coord] = spec.function(coord, grid, nranks)
    return result



def folded_nodes(nodes, nranks, what: str, foldable: bool = True) -> int:
    """The node count a plan of `what` is computed for: `nodes` (None: the ranks), a
    multiple of the ranks, node n then running on rank n % nranks; a layout that is not
    `foldable` (a mesh, pp, cp) must have as many nodes as ranks."""
    nodes = nodes or nranks
    if nodes % nranks:
        raise ValueError(f"{what} was made for {nodes} nodes, which do not fold onto the "
                         f"plan's {nranks} rank(s): num_nodes must be the number of ranks "
                         f"or a multiple of it (node n runs on rank n % {nranks})")
    if nodes != nranks and not foldable:
        raise ValueError(f"{what} is not folded: its nodes ({nodes}) must be the plan's "
                         f"ranks ({nranks})")
    return nodes

OWNER_RULES = {
    "round_robin": lambda spec, linear, grid, n: (linear + spec.offset) % n,
    "block": lambda spec, linear, grid, n: _blocks(linear, linear.size, n),
    "block_along_dim": _along_dim,
    "custom": _custom,
    "replicated": lambda spec, linear, grid, n: REPLICATED,
    "on_rank": lambda spec, linear, grid, n: spec.rank,
    "load_balanced": _load_balanced,
    "mesh": _mesh,
}
