"""Runtime layer: moving whole tensors in and out of a CompiledGraph's tiles."""

from __future__ import annotations

import numpy as np

from ..graph.dtypes import storage_dtype
from ..plan.distribution import REPLICATED
from .consistency import data_hash, text_hash


class BindingMixin:
    """bind_data / bind_tiles / get_output for CompiledGraph."""

    def check_graph_unchanged(self, caller):
        """Raise if ops or tensors were added to the graph after compile (the plan
        knows nothing of them); cheap: two counts."""
        now, then = (len(self.graph.tensors()), len(self.graph.ops())), self.graph_size
        if now != then:
            raise RuntimeError(
                f"{caller}: the graph {self.graph.name!r} changed since compile ({then[0]} "
                f"tensors and {then[1]} ops then, {now[0]} and {now[1]} now); "
                "compile it again (or build the new ops in another graph)")

    def _kept_tensor(self, name, caller, remedy):
        """The tensor `name` if its tiles live between executes, else a clear error."""
        self.check_graph_unchanged(caller)
        if not self.graph.has_tensor(name):
            raise KeyError(f"{caller}: graph {self.graph.name!r} has no tensor {name!r}")
        tensor = self.graph.get_tensor(name)
        if not tensor.keeps_storage:
            raise ValueError(f"{caller}: {tensor.describe()} is {remedy}")
        return tensor

    def _bindable(self, name):
        return self._kept_tensor(name, "bind", "an intermediate; mark_input() it or make "
                                 "it persistent/external to bind data")

    def _check_array(self, tensor, array, expected_shape, what):
        array = np.asarray(array)
        want = storage_dtype(tensor.dtype)
        if array.dtype != want:
            raise TypeError(f"bind {what}: got dtype {array.dtype}, expected {want} "
                            f"for {tensor.describe()} (no implicit casts)")
        if array.shape != tuple(expected_shape):
            raise ValueError(f"bind {what}: got shape {list(array.shape)}, expected "
                             f"{list(expected_shape)} for {tensor.describe()}")
        return array

    def bind_data(self, name: str, array):
        """Every rank passes the whole tensor; each keeps the tiles it holds."""
        tensor = self._bindable(name)
        array = self._check_array(tensor, array, tensor.shape, name)
        spec = self.plan.tilings[name]
        if len(self.stores) < self.world.size:   # real ranks: compared at the next execute
            self.agreement.record_bind(name, array)
        for rank, store in self.stores.items():
            for coord in spec.coords():
                key = (name, coord)
                if key in self.plan.permanent[rank]:
                    self.device.copy_in(store[key], array[spec.tile_slices(coord)])
        self.bound.setdefault(name, set()).update(self.stores)

    def bind_tiles(self, name: str, tiles: dict, rank=None):
        """Pass only this rank's tiles {tile_coord: array} (all it holds must be given).

        Collective under MPI: every rank calls it, with {} if it holds no tile of `name`.
        """
        tensor = self._bindable(name)
        rank = self.world.rank if rank is None else rank
        # every tile is checked first and the ranks agree on the outcome: a rank given
        # wrong tiles makes every rank raise (raising alone would leave the others
        # blocked in agree()), and no tile of a bad call is copied
        try:
            arrays, error = self._checked_tiles(tensor, tiles, rank), None
        except (ValueError, TypeError) as caught:
            arrays, error = {}, caught
        shared = self._shared_hashes(name, arrays)
        verdicts = self.world.agree((error is None, shared), f"bind_tiles {name}")
        failed = [other for other, (ok, _) in enumerate(verdicts) if not ok]
        if error is not None:
            raise error
        if failed:
            raise ValueError(f"bind_tiles {name}: rank(s) {failed} were given wrong tiles")
        differences = self._shared_differences([hashes for _, hashes in verdicts])
        if differences:
            raise ValueError(f"bind_tiles {name}: tiles that several ranks hold were given "
                             f"different values: {'; '.join(differences)} (every rank must "
                             "pass the same values for the tiles it shares)")
        for coord, array in arrays.items():
            self.device.copy_in(self.stores[rank][(name, coord)], array)
        # per rank: in a simulated world each rank's tiles are bound by its own call
        self.bound.setdefault(name, set()).add(rank)

    def _shared_hashes(self, name, arrays):
        """{owner code: hash of this rank's tiles of that code} for the tiles several
        ranks hold: every rank's (REPLICATED) and a mesh group's (a tp group's batch
        shard, say). One hash per group the rank is in, so the exchange stays as small
        as when only REPLICATED tiles were compared (a check of those alone let a tp
        pair given different data train on, each rank agreeing with the others)."""
        if len(self.stores) == self.world.size:
            return {}      # one process bound every rank's tiles: nothing to compare
        owners, by_owner = self.plan.owners[name], {}
        for coord in sorted(arrays):
            owner = int(owners[coord])
            if owner < 0:                  # REPLICATED, or a mesh group's code
                by_owner.setdefault(owner, []).append(data_hash(arrays[coord]))
        return {owner: text_hash(repr(hashes)) for owner, hashes in by_owner.items()}

    def _shared_differences(self, every_rank) -> list:
        """For each owner code, the holders whose hash differs from its lowest holder's."""
        lines = []
        for owner in sorted({code for hashes in every_rank for code in hashes}, reverse=True):
            holders = [rank for rank in self.plan.ranks_of_owner(owner)
                       if owner in every_rank[rank]]
            first = holders[0]
            differ = [rank for rank in holders
                      if every_rank[rank][owner] != every_rank[first][owner]]
            if differ:
                whose = ("every rank holds" if owner == REPLICATED
                         else f"ranks {list(self.plan.ranks_of_owner(owner))} hold")
                lines.append(f"rank(s) {differ} differ from rank {first} in the tiles {whose}")
        return lines

    def _checked_tiles(self, tensor, tiles, rank):
        name, spec = tensor.name, self.plan.tilings[tensor.name]
        local = {coord for coord in spec.coords() if (name, coord) in self.plan.permanent[rank]}
        given = {tuple(coord) for coord in tiles}
        if given != local:
            raise ValueError(f"bind_tiles {name} on rank {rank}: got tiles {sorted(given)}, "
                             f"this rank holds {sorted(local)}")
        return {tuple(coord): self._check_array(tensor, array, spec.tile_shape(tuple(coord)),
                                                f"{name}{tuple(coord)}")
                for coord, array in tiles.items()}

    def local_tiles(self, name: str, rank=None) -> list:
        """Tile coordinates of `name` this rank holds (what bind_tiles expects)."""
        self.check_graph_unchanged("local_tiles")
        rank = self.world.rank if rank is None else rank
        return [coord for coord in self.plan.tilings[name].coords()
                if (name, coord) in self.plan.permanent[rank]]

    def get_output(self, name: str, root=None):
        """The whole tensor on every rank, or on `root` only (None elsewhere)."""
        tensor = self._kept_tensor(name, "get_output", "not kept after execute(); "
                                   "mark_output() it before compiling")
        if root is not None and not (isinstance(root, int) and 0 <= root < self.world.size):
            raise ValueError(f"get_output {name}: root must be a rank in [0, "
                             f"{self.world.size - 1}] or None (every rank), got {root!r}")
        if not (tensor.persistent or name in self.bound or name in self.produced):
            raise RuntimeError(f"get_output {name}: no execute() has computed it yet (its "
                               f"ops run in phase(s) {self.phases_writing(name)})")
        spec = self.plan.tilings[name]
        dtype = storage_dtype(tensor.dtype)
        here = root is None or root == self.world.rank
        result = np.empty(tensor.shape, dtype=dtype, order="F") if here else None
        for coord in spec.coords():
            owner = self.plan.first_holder((name, coord))
            tile = self.world.fetch_tile(self.host_stores(), (name, coord), owner, root,
                                         (spec.tile_shape(coord), dtype))
            if here:
                result[spec.tile_slices(coord)] = tile
        return result

    def logged_scalars(self) -> dict:
        """{name: value} of every `ops.log_scalar` an execute has run, in program order:
        each value as it was where the op stands in the program. Collective."""
        names = [op.outputs[0].name for op in self.graph.ops()
                 if op.op_type == "log_scalar" and op.outputs[0].name in self.produced]
        return {name: float(self.get_output(name)) for name in names}

    def phases_writing(self, name):
        return sorted({op.phase for op in self.graph.ops()
                       if any(t.name == name for t in op.outputs)})

    def host_stores(self):
        """Stores as NumPy views for gathering (CuPy tiles are copied to the host)."""
        return {rank: HostView(store, self.device) for rank, store in self.stores.items()}

    def check_inputs_bound(self):
        missing = [t.name for t in self.graph.tensors()
                   if needs_binding(t) and not set(self.stores) <= self.bound.get(t.name, set())]
        if missing:
            raise RuntimeError(f"execute: bind_data() these tensors first: {missing} "
                               "(inputs, constants and parameters have no default value)")


def needs_binding(tensor) -> bool:
    """Must `tensor` be bound before an execute (it has no default value)?"""
    return tensor.is_input or tensor.external or tensor.role == "parameter"


class HostView:
    def __init__(self, store, device):
        self.store, self.device = store, device

    def __getitem__(self, key):
        return self.device.to_host(self.store[key])
