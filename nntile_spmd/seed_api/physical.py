"""Seed API: PhysicalGraph, the seed's second stage (how to tile and distribute a
LogicalGraph), and the seed's distribution helpers (DistributionPreset, §4.1.1;
DistributionStrategy, §5.1).

compile() is nt.compile of a copy of the logical graph to which the backward of every
output is appended once: each output gets a cotangent input `<output>_cotangent` and
nt.grad(..., cotangents=...) adds the ops of the gradients of sum <output, dy> with
respect to the parameters and requires_grad inputs. ExecutableGraph.backward() runs
that plan; nothing is planned after compile().

num_nodes is the plan's node count. On a world of fewer ranks, when it is a multiple of
their number, the nodes are folded onto the ranks: every distribution is computed for
num_nodes nodes and node n runs on rank n % size (plan/presets.py, Preset.nodes), so
the seed's PhysicalGraph(logical, num_nodes=8) runs on 1, 2 or 4 ranks as written.
memory_on_node(r) then plans node r of the num_nodes-node job alone (a PlanningWorld).
"""

from __future__ import annotations

from dataclasses import replace

from ..graph.autodiff import grad, unique_name
from ..graph.dtypes import FLOAT_DTYPES
from ..plan.mesh import Mesh
from ..plan.presets import PRESET_NAMES, Preset
from ..runtime.compile_steps import make_world
from ..runtime.planning import PlanningWorld
from ..search import compile as compile_graph

COTANGENT_SUFFIX = "_cotangent"


class PhysicalGraph:
    """A LogicalGraph with a tiling and a distribution on a world of `num_nodes` nodes.

    `comm`: an MPI communicator (default MPI.COMM_WORLD), a SimulatedWorld or a
    PlanningWorld; `num_nodes` (default: its size) is the plan's node count, the
    world's size or a multiple of it (the nodes are then folded onto the ranks: node n
    runs on rank n % size). `shape_bindings` binds the logical graph's symbolic dims.
    Other keywords go to nt.compile (device, threads, deterministic, ...)."""

    def __init__(self, logical, num_nodes=None, shape_bindings=None, comm=None, **options):
        self.logical = logical
        self.shape_bindings = dict(shape_bindings or {})
        self.world = make_world(comm, options.get("recv_timeout"))
        self.num_nodes = checked_nodes(logical, num_nodes, self.world)
        self.options = options
        self.tiling_strategy = None
        self.preset = "single"        # a preset name, a Preset or a mesh
        self.overrides = {}           # tensor name -> TileDistribution
        self.compiled = None          # the CompiledGraph, after compile()
        self.grad_names = {}          # parameter / input name -> its gradient's name
        self.cotangent_names = {}     # output name -> its cotangent input's name
        self.node_plans = {}          # node -> its CompiledGraph on a PlanningWorld (folded)

    @property
    def folded(self) -> bool:
        """Does each rank host several of the plan's nodes?"""
        return self.num_nodes != self.world.size

    # -- configuration ----------------------------------------------------------------
    def set_tiling(self, strategy) -> None:
        self.refuse_if_compiled("set_tiling")
        self.tiling_strategy = strategy

    def set_distribution(self, distribution) -> None:
        """A preset name, Preset or mesh dict (what nt.compile's distribution= takes)."""
        self.refuse_if_compiled("set_distribution")
        self.preset = distribution

    def set_tensor_distribution(self, name: str, distribution) -> None:
        """Place tensor `name`'s tiles by `distribution` (a TileDistribution); the
        other tensors follow the preset (default "single": rank 0)."""
        self.refuse_if_compiled("set_tensor_distribution")
        self.overrides[self.logical.resolve(name).name] = distribution

    def set_execution_policy(self, policy) -> None:
        """An ExecutionPolicy: placement, prefetch and offloading (nt.compile's policy=)."""
        self.refuse_if_compiled("set_execution_policy")
        self.options["policy"] = policy

    def refuse_if_compiled(self, caller):
        if self.compiled is not None:
            raise RuntimeError(f"PhysicalGraph.{caller}: {self.logical.name!r} is already "
                               "compiled; make a new PhysicalGraph for another layout")

    def distribution_argument(self, nodes=None):
        """What nt.compile's distribution= gets: the preset with the per-tensor overrides,
        planned for `nodes` nodes (None: the world's ranks)."""
        preset = self.preset
        if isinstance(preset, str) and preset in PRESET_NAMES:
            return Preset(preset, overrides=dict(self.overrides), nodes=nodes)
        if isinstance(preset, Preset):
            return replace(preset, overrides={**preset.overrides, **self.overrides},
                           nodes=nodes)
        if self.overrides:
            raise ValueError(f"PhysicalGraph {self.logical.name!r}: per-tensor distributions "
                             f"cannot be combined with the distribution {preset!r}")
        if nodes is not None:
            raise ValueError(f"PhysicalGraph {self.logical.name!r}: num_nodes="
                             f"{self.num_nodes} on {self.world.size} rank(s) folds the "
                             f"presets single/ddp/fsdp/tp and per-tensor distributions, "
                             f"not {preset!r}; launch {self.num_nodes} ranks for it")
        return preset

    # -- compile ----------------------------------------------------------------------
    def compile(self) -> PhysicalGraph:
        """Plan forward and backward on the world (collective); returns self."""
        if self.compiled is not None:
            return self
        nodes = self.num_nodes if self.folded else None
        self.compiled = compile_graph(self.planned_graph(), self.world, self.tiling_strategy,
                                      self.distribution_argument(nodes), **self.options)
        return self

    def planned_graph(self):
        """A copy of the logical graph (symbols bound) with the backward appended."""
        graph = self.logical.bind(self.shape_bindings) if self.shape_bindings \
            else self.logical.clone()
        self.add_backward(graph)
        return graph

    def add_backward(self, graph) -> None:
        """A cotangent input per float output, and the gradient ops of sum <output, dy>."""
        targets = [t for t in graph.tensors()
                   if t.role == "parameter" or (t.role == "input" and t.requires_grad)]
        named = graph.output_names()
        for tensor in graph.outputs():
            if tensor.name not in {t.name for t in named.values()}:
                named[tensor.name] = tensor
        outputs = {name: t for name, t in named.items() if t.dtype in FLOAT_DTYPES}
        if not targets or not outputs:
            return
        cotangents = []
        for name, tensor in outputs.items():
            cotangent = graph.tensor(tensor.shape, unique_name(graph, name + COTANGENT_SUFFIX),
                                     tensor.dtype, external=True)
            self.cotangent_names[name] = cotangent.name
            cotangents.append(cotangent)
        grads = grad(graph, list(outputs.values()), targets, accumulate=False,
                     cotangents=cotangents)
        self.grad_names = {t.name: g.name for t, g in zip(targets, grads)}

    def compiled_graph(self, caller):
        if self.compiled is None:
            raise RuntimeError(f"PhysicalGraph.{caller}: call compile() first")
        return self.compiled

    # -- the plan ----------------------------------------------------------------------
    def memory_on_node(self, node: int) -> int:
        """Planned peak bytes of node `node` in a forward + backward execute: its rank's
        when each rank is one node; when folded, node `node` of the num_nodes-node plan,
        planned alone (once) on nt.PlanningWorld(num_nodes, node)."""
        compiled = self.compiled_graph("memory_on_node")
        if isinstance(node, bool) or not isinstance(node, int) or \
                not 0 <= node < self.num_nodes:
            raise ValueError(f"memory_on_node: node must be in 0..{self.num_nodes - 1}, "
                             f"got {node!r}")
        if not self.folded:
            return compiled.memory_on_rank(node)
        if node not in self.node_plans:
            self.node_plans[node] = compile_graph(
                self.planned_graph(), PlanningWorld(self.num_nodes, node),
                self.tiling_strategy, self.distribution_argument(), **self.options)
        return self.node_plans[node].memory_on_rank(node)

    def tiling(self, name: str):
        """The TilingSpec of tensor (or output) `name`."""
        return self.compiled_graph("tiling").plan.tilings[self.logical.resolve(name).name]

    def distribution(self, name: str):
        """The TileDistribution of tensor (or output) `name`."""
        compiled = self.compiled_graph("distribution")
        return compiled.plan.distributions[self.logical.resolve(name).name]

    def __repr__(self) -> str:
        state = "compiled" if self.compiled is not None else "not compiled"
        return (f"PhysicalGraph({self.logical.name!r}, num_nodes={self.num_nodes}, "
                f"{self.preset!r}, {state})")


class DistributionPreset:
    """The seed's presets applied to a PhysicalGraph (per-tensor choices stay on top)."""

    @staticmethod
    def apply_ddp(physical: PhysicalGraph, num_nodes: int | None = None) -> None:
        apply_preset(physical, "ddp", num_nodes)

    @staticmethod
    def apply_fsdp(physical: PhysicalGraph, num_nodes: int | None = None) -> None:
        apply_preset(physical, "fsdp", num_nodes)

    @staticmethod
    def apply_tp(physical: PhysicalGraph, num_nodes: int | None = None) -> None:
        apply_preset(physical, "tp", num_nodes)


def apply_preset(physical, preset, num_nodes):
    if num_nodes is not None and num_nodes != physical.num_nodes:
        raise ValueError(f"DistributionPreset.apply_{preset}: num_nodes={num_nodes}, but the "
                         f"PhysicalGraph has {physical.num_nodes} node(s)")
    physical.set_distribution(preset)


def checked_nodes(logical, num_nodes, world) -> int:
    """The plan's node count: the world's size, or a multiple of it (folded)."""
    if num_nodes is None:
        return world.size
    if isinstance(num_nodes, bool) or not isinstance(num_nodes, int) or num_nodes < 1 or \
            num_nodes % world.size:
        raise ValueError(
            f"PhysicalGraph({logical.name!r}, num_nodes={num_nodes!r}): the world has "
            f"{world.size} rank(s) ({world!r}); num_nodes must be {world.size} or a multiple "
            f"of it (each rank then hosts num_nodes / {world.size} nodes); or launch "
            f"{num_nodes} ranks (mpiexec -n {num_nodes}), pass comm=nt.SimulatedWorld("
            f"{num_nodes}) to run them in this process, or nt.PlanningWorld({num_nodes}, "
            f"rank) to plan")
    return num_nodes


class DistributionStrategy:
    """Seed §5.1's factories; each returns what nt.compile's distribution= accepts."""

    @staticmethod
    def ddp(world_size: int) -> Preset:
        check_world_size("ddp", world_size)
        return Preset("ddp")

    @staticmethod
    def fsdp(world_size: int, shard_degree: int = -1):
        """Parameters sharded over `shard_degree` ranks (-1: all); fewer is HSDP,
        replicated over world_size / shard_degree groups."""
        check_world_size("fsdp", world_size)
        if shard_degree in (-1, world_size):
            return Preset("fsdp")
        if not isinstance(shard_degree, int) or shard_degree < 1 or world_size % shard_degree:
            raise ValueError(f"DistributionStrategy.fsdp: shard_degree={shard_degree!r} must "
                             f"divide world_size={world_size}")
        return Mesh((("dp", world_size // shard_degree), ("fsdp", shard_degree)))

    @staticmethod
    def tensor_parallel(world_size: int, dims=None) -> Preset:
        """The "tp" preset splitting dims `dims` of every weight (a parameter of two or
        more dims) over the ranks; without dims it picks the split axes itself
        (TensorNode.split_for_tp marks one)."""
        check_world_size("tensor_parallel", world_size)
        if dims is None:
            return Preset("tp")
        if isinstance(dims, int):
            dims = [dims]
        if not dims or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0
                               for d in dims):
            raise ValueError(f"DistributionStrategy.tensor_parallel: dims={dims!r} must be "
                             "one or more dims (0, 1, ...) of the weights")
        return Preset("tp", weight_dims=tuple(dims))


def check_world_size(factory, world_size):
    if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"DistributionStrategy.{factory}: world_size must be an int >= 1, "
                         f"got {world_size!r}")
