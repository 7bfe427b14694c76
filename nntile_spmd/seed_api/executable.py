"""Seed API: ExecutableGraph, the seed's third stage (§4.1.4): a compiled PhysicalGraph
bound to memory on the ranks, with the seed's calls over the CompiledGraph below.

- execute() runs the forward phase; backward() the planned forward + backward program
  (forward values are not kept between executes, so backward computes them again; it
  plans nothing), giving the gradients of sum over outputs of <output, dy> for the dy
  bound with bind_output_grad (an unbound one is zero).
- init_parameters fills each rank's own tiles (initializers.py); load_parameters /
  save_parameters read and write safetensors files (or a folder holding
  model.safetensors) and PyTorch .pt state dicts.
- execute_async() runs the rank's program on a worker thread (asynchronous.py).

Every call is collective: every rank makes the same calls in the same order.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..graph.dtypes import storage_dtype
from .asynchronous import AsyncRunner
from .initializers import check_initializer, draw_tile

SAFETENSORS_IN_FOLDER = "model.safetensors"


class ExecutableGraph:
    """A PhysicalGraph's plan with its tiles allocated (compiled first if need be)."""

    def __init__(self, physical, zero_inputs: bool = False):
        self.physical = physical.compile()
        self.cg = physical.compiled
        self.graph = self.cg.graph
        self.runner = AsyncRunner(self)
        # the tiles exist, zeroed: cotangents default to zero (no gradient from an
        # output whose dy is not bound); ComputeGraph's inputs too (seed §5.2)
        self.zeroed = list(physical.cotangent_names.values())
        if zero_inputs:
            self.zeroed += [t.name for t in self.graph.tensors() if t.role == "input"]
        self.mark_zeroed_bound()

    def mark_zeroed_bound(self):
        for name in self.zeroed:
            self.cg.bound[name] = set(self.cg.stores)

    # -- names -----------------------------------------------------------------------
    def tensor(self, name: str):
        """The compiled graph's tensor called `name` (an output under its output name)."""
        return self.graph.resolve(name)

    def parameter_names(self) -> list:
        return [t.name for t in self.graph.tensors() if t.role == "parameter"]

    # -- data in -----------------------------------------------------------------------
    def bind_input(self, name: str, array) -> None:
        """Every rank passes the whole array; each keeps its tiles. While a program runs
        the array is copied and bound before the next execute (the running one never
        sees it)."""
        tensor = self.tensor(name)
        if not tensor.keeps_storage:
            raise ValueError(f"bind_input: {tensor.describe()} is an intermediate of "
                             f"graph {self.graph.name!r}, not an input")
        self.runner.bind(tensor.name, array)

    def bind_output_grad(self, name: str, dy) -> None:
        """dy for output `name`: backward() differentiates <output, dy>."""
        output = self.tensor(name)
        cotangent = self.physical.cotangent_names.get(name) or \
            self.physical.cotangent_names.get(output.name)
        if cotangent is None:
            raise KeyError(f"bind_output_grad: {name!r} is not a floating-point output of "
                           f"graph {self.graph.name!r} through which a parameter or "
                           f"requires_grad input is differentiated (outputs: "
                           f"{sorted(self.physical.cotangent_names)})")
        self.runner.bind(cotangent, dy)

    def init_parameters(self, initializer="xavier_uniform", seed: int = 0) -> None:
        """Fill every parameter (a dict {name: initializer} for some only): each rank
        draws its own tiles; the same values on any rank count and tiling."""
        chosen = initializer if isinstance(initializer, dict) else \
            {name: initializer for name in self.parameter_names()}
        unknown = [name for name in chosen if name not in self.parameter_names()]
        if unknown:
            raise KeyError(f"init_parameters: graph {self.graph.name!r} has no parameter(s) "
                           f"{unknown} (parameters: {self.parameter_names()})")
        self.runner.refuse_while_running("init_parameters")
        for name, kind in chosen.items():
            self.init_one(name, check_initializer(name, kind), seed)

    def init_one(self, name, initializer, seed):
        tensor, cg = self.graph.get_tensor(name), self.cg
        spec, dtype = cg.plan.tilings[name], storage_dtype(tensor.dtype)
        for rank, store in cg.stores.items():
            for coord in spec.coords():
                if (name, coord) in cg.plan.permanent[rank]:
                    values = draw_tile(initializer, name, tensor.shape, spec.tile_shape(coord),
                                       spec.tile_offset(coord), seed)
                    cg.device.copy_in(store[(name, coord)], values.astype(dtype))
        cg.bound[name] = set(cg.stores)

    def load_parameters(self, path) -> list:
        """Bind parameters from a safetensors file, a folder holding model.safetensors, or
        a PyTorch state dict (.pt, .pth, .bin; read with weights_only=True). Every
        parameter must be there. Returns the names bound."""
        self.runner.refuse_while_running("load_parameters")
        path = Path(path)
        if path.suffix in (".pt", ".pth", ".bin"):
            return self.load_torch(path)
        from ..train.safetensors_file import import_safetensors   # the train layer: on use
        file = path / SAFETENSORS_IN_FOLDER if path.is_dir() else path
        return import_safetensors(self.cg, file, self.parameter_names())

    def load_torch(self, path) -> list:
        import torch   # optional: only .pt files need it
        state = torch.load(path, map_location="cpu", weights_only=True)
        names = self.parameter_names()
        missing = [name for name in names if name not in state]
        if missing:
            raise KeyError(f"load_parameters({path}): parameter(s) {missing} are not in "
                           f"the file (it has {sorted(state)[:20]})")
        for name in names:
            tensor = self.graph.get_tensor(name)
            array = np.asarray(state[name].detach().numpy())
            if array.shape != tensor.shape:
                raise ValueError(f"load_parameters({path}): {name} has shape "
                                 f"{list(array.shape)}, the graph has {tensor.describe()}")
            self.cg.bind_data(name, array)
        return names

    def save_parameters(self, path) -> list:
        """Write the parameters (rank 0 writes): a .pt state dict through torch, else a
        safetensors file (a folder: path/model.safetensors). Collective."""
        self.runner.refuse_while_running("save_parameters")
        path = Path(path)
        if path.suffix in (".pt", ".pth", ".bin"):
            return self.save_torch(path)
        if path.is_dir() or not path.suffix:
            path.mkdir(parents=True, exist_ok=True)
            path = path / SAFETENSORS_IN_FOLDER
        from ..train.safetensors_file import export_safetensors
        return export_safetensors(self.cg, path, self.parameter_names())

    def save_torch(self, path) -> list:
        import torch
        names = self.parameter_names()
        arrays = {name: self.cg.get_output(name, root=0) for name in names}
        if self.cg.world.rank == 0:
            torch.save({name: torch.from_numpy(np.ascontiguousarray(array))
                        for name, array in arrays.items()}, path)
        return names

    def share_parameters(self, other, names=None) -> list:
        """From now on this graph's parameters `names` (default: every parameter `other`
        has too) are `other`'s tiles, not a copy, and so are their gradients where both
        graphs compute one: what one graph's init, bind or run writes, the other's next
        run reads (seed §10.4.3; runtime/sharing.py). Returns the shared tensor names.
        Both graphs on one world, each tensor tiled and placed alike, else ValueError.
        Their programs run in the order started (execute_async of one waits for the
        other's started ones), and while one runs the other refuses reads and defers
        binds, as for its own programs."""
        for graph in (self, other):
            graph.runner.refuse_while_running("share_parameters")
        mine, theirs = self.parameter_names(), set(other.parameter_names())
        chosen = [name for name in mine if name in theirs] if names is None else list(names)
        for name in chosen:
            if name not in mine or name not in theirs:
                raise ValueError(f"share_parameters: {name!r} is not a parameter of both "
                                 f"graph {self.graph.name!r} and graph {other.graph.name!r}")
        grads = [(self.physical.grad_names.get(name), other.physical.grad_names.get(name))
                 for name in chosen]
        shared = chosen + [g for g, h in grads if g is not None and g == h]
        self.cg.share_tensors(other.cg, shared)
        self.runner.peers.append(other.runner)   # run in the order started (asynchronous.py)
        other.runner.peers.append(self.runner)
        return shared

    # -- running -----------------------------------------------------------------------
    def execute(self) -> None:
        """The forward phase, on every rank."""
        self.runner.start(("forward",), "execute").result()

    def execute_async(self):
        """Start the forward phase; returns a TaskHandle."""
        return self.runner.start(("forward",), "execute_async", background=True)

    def backward(self) -> None:
        """The gradients of sum <output, dy> over the outputs (forward and backward)."""
        if not self.physical.grad_names:
            raise RuntimeError(f"backward: graph {self.graph.name!r} has no gradient to "
                               "compute (no parameter or requires_grad input reaches an "
                               "output)")
        self.runner.start(("forward", "backward"), "backward").result()

    def synchronize(self) -> None:
        """Wait for every execute_async started on this graph."""
        self.runner.wait_all()

    # -- data out ----------------------------------------------------------------------
    def get_output(self, name: str, root=None):
        """The whole tensor on every rank (or on `root` only)."""
        self.runner.refuse_while_running("get_output")
        return self.cg.get_output(self.tensor(name).name, root)

    get_tensor = get_output   # seed §5.2's name

    def get_parameter_grad(self, name: str, root=None):
        """The whole gradient of parameter (or requires_grad input) `name`."""
        grad_name = self.physical.grad_names.get(name)
        if grad_name is None:
            raise KeyError(f"get_parameter_grad: {name!r} is not a parameter or "
                           f"requires_grad input of graph {self.graph.name!r} "
                           f"(those with gradients: {sorted(self.physical.grad_names)})")
        return self.get_output(grad_name, root)

    def get_stats(self, rank=None):
        """What this rank (or a simulated `rank`) measured in the last run."""
        self.runner.refuse_while_running("get_stats")
        return self.cg.get_stats(rank)

    def clear_buffers(self) -> None:
        """Zero every kept tile that is not a parameter (inputs, outputs, cotangents,
        gradients, state) and forget what was bound and computed: inputs must be bound
        again (but those zero from the start: cotangents, ComputeGraph's inputs), outputs
        computed again. The tiles stay allocated (the plan places them)."""
        self.runner.refuse_while_running("clear_buffers")
        cg = self.cg
        for rank, store in cg.stores.items():
            for key in cg.plan.permanent[rank]:
                if self.graph.get_tensor(key[0]).role != "parameter":
                    store[key][...] = 0
        for name in list(cg.bound):
            if self.graph.get_tensor(name).role != "parameter":
                del cg.bound[name]
        self.mark_zeroed_bound()   # zero again, as at creation: cotangents (and
        cg.produced.clear()        # ComputeGraph's inputs) need no binding

    def __repr__(self) -> str:
        return f"ExecutableGraph({self.physical!r})"
