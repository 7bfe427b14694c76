"""Train layer: sharded atomic checkpoints (one safetensors file of a model's tensors by
name is train/safetensors_file.py's).

A checkpoint directory holds one safetensors shard per rank (the tiles of persistent
tensors it owns; replicated tiles come from rank 0) and manifest.json, written last
by rank 0, which alone makes a checkpoint visible. Loading re-tiles into any rank
count or preset. Collectives go through cg.world (no mpi4py import here).
"""

from __future__ import annotations

import hashlib
import json
import re
import time
import uuid
from pathlib import Path

import numpy as np
from safetensors import safe_open
from safetensors.numpy import save as safetensors_bytes

from ..folder_paths import OutsideFolder, inside
from ..private_files import replace_atomically
from ..graph.dtypes import storage_dtype
from ..plan import REPLICATED, DimensionTiling

FORMAT = "nntile_spmd-checkpoint-2"   # 2: the manifest carries its own checksum
FORMAT_FAMILY = "nntile_spmd-checkpoint-"
MAX_SHARD_HEADER_BYTES = 100 << 20    # safetensors' own bound on a header
MANIFEST = "manifest.json"
SHARD_PATTERN = re.compile(r"^ckpt-[\w-]+\.rank\d{5}-of-\d{5}\.safetensors$")
TEMP_PATTERN = re.compile(r"^\.(manifest\.json|ckpt-[\w.-]+)\.[^.]+\.tmp$")


class CheckpointError(RuntimeError):
    """A checkpoint could not be written or read (missing, incomplete, corrupted)."""


def write_atomic(path, data: bytes):
    """Replace `path` with `data` all at once and durably, with a new file's permissions."""
    replace_atomically(path, data, mode=None, durable=True)


def tile_key(name: str, coord) -> str:
    return f"{name}@{','.join(str(int(c)) for c in coord)}"


def checksum(array) -> str:
    """sha256 of the tile's bytes in C order (the layout safetensors stores)."""
    return hashlib.sha256(np.array(array, order="C", copy=True).tobytes()).hexdigest()


def gather(world, local_value, what: str) -> list:
    """Every rank's value; a simulated world holds all ranks here, so its local list is all.
    `what` names the exchange in a timeout's message (a slow file system shows here)."""
    values = world.agree(local_value, what)
    return [local_value] if len(world.local_ranks()) == world.size else values


def raise_if_any(world, error, what):
    """Collective verdict: every rank raises if any rank failed (never a hang)."""
    errors = [e for e in gather(world, error, f"the ranks' verdicts on {what}") if e]
    if errors:
        raise CheckpointError(f"{what}: " + "; ".join(errors))


# -- save ------------------------------------------------------------------------------------
def save_checkpoint(cg, directory, step=None, extra=None) -> Path:
    """Write the persistent tensors of `cg` (parameters, gradients, optimizer state) to
    `directory`; collective. The previous checkpoint there stays valid until the new
    manifest replaces it. Returns the manifest path."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    world = cg.world
    label = f"step{int(step):08d}-" if step is not None else ""
    token = world.agree(f"ckpt-{label}{uuid.uuid4().hex[:12]}",     # rank 0's name for all
                        f"save_checkpoint({directory}): the checkpoint's name")[0]
    names = [t.name for t in cg.graph.tensors() if t.persistent]
    records, error = [], None
    try:
        for rank in world.local_ranks():
            records += write_shard(cg, directory, token, names, rank)
    except Exception as exc:   # reported collectively below, so no rank hangs
        error = f"rank {world.rank} could not write its shard ({exc!r})"
    gathered = gather(world, (records, error),
                      f"save_checkpoint({directory}): every rank writing its shard")
    raise_if_any(world, next((e for _, e in gathered if e), None),
                 "save_checkpoint failed, the previous checkpoint is kept")
    records = [record for part, _ in gathered for record in part]
    manifest_path, error = directory / MANIFEST, None
    if world.rank == 0:
        try:
            manifest = build_manifest(cg, names, records, step, extra)
            write_atomic(manifest_path, json.dumps(manifest, indent=1).encode())
            remove_stale(directory, set(manifest["files"]))
        except Exception as exc:
            error = f"rank 0 could not commit the manifest ({exc!r})"
    raise_if_any(world, error, "save_checkpoint failed, the previous checkpoint is kept")
    return manifest_path


def write_shard(cg, directory, token, names, rank) -> list:
    """Write the tiles `rank` owns (replicated ones on rank 0) as one safetensors file."""
    plan, stores = cg.plan, cg.host_stores()
    filename = f"{token}.rank{rank:05d}-of-{plan.nranks:05d}.safetensors"
    arrays, records = {}, []
    for name in names:
        for coord in plan.tilings[name].coords():
            owner = plan.first_holder((name, coord))   # a mesh group's: its lowest rank
            if owner == rank or (owner == REPLICATED and rank == 0):
                tile = np.array(stores[rank][(name, coord)], order="C", copy=True)
                key = tile_key(name, coord)
                arrays[key] = tile
                records.append({"tensor": name, "coord": [int(c) for c in coord],
                                "file": filename, "key": key, "sha256": checksum(tile)})
    if arrays:
        write_atomic(directory / filename, safetensors_bytes(arrays, {"format": FORMAT}))
    return records


def build_manifest(cg, names, records, step, extra) -> dict:
    plan, tensors = cg.plan, {}
    for name in names:
        tensor = cg.graph.get_tensor(name)
        tensors[name] = {"shape": list(tensor.shape), "dtype": tensor.dtype, "role": tensor.role,
                         "tiling": [list(d.boundaries) for d in plan.tilings[name].dims],
                         "distribution": repr(plan.distributions[name]),
                         "owners": plan.owners[name].tolist()}
    manifest = {"format": FORMAT, "step": None if step is None else int(step),
                "world_size": plan.nranks, "graph": cg.graph.name,
                "fingerprint": plan.fingerprint(), "created": time.time(),
                "extra": dict(extra or {}), "tensors": tensors, "tiles": records,
                "files": sorted({record["file"] for record in records})}
    manifest["checksum"] = manifest_checksum(manifest)
    return manifest


def manifest_checksum(manifest) -> str:
    """sha256 of the manifest's canonical JSON without its "checksum" field."""
    body = {key: value for key, value in manifest.items() if key != "checksum"}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def remove_stale(directory, keep):
    """Delete the shards of earlier or interrupted saves that the new manifest does not
    name, and temp files of interrupted saves. A shard is a file of the shard name
    pattern whose safetensors metadata says save_checkpoint wrote it: a user's file that
    only matches the name pattern is kept."""
    for path in directory.iterdir():
        stale_shard = (SHARD_PATTERN.match(path.name) and path.name not in keep
                       and written_by_save_checkpoint(path))
        if stale_shard or TEMP_PATTERN.match(path.name):
            path.unlink(missing_ok=True)


def written_by_save_checkpoint(path) -> bool:
    """Whether `path` is a safetensors file whose metadata names a checkpoint format of
    this library (its header only is read: an 8-byte length, then JSON)."""
    try:
        with open(path, "rb") as file:
            length = int.from_bytes(file.read(8), "little")
            if not 0 < length <= MAX_SHARD_HEADER_BYTES:
                return False
            metadata = json.loads(file.read(length)).get("__metadata__") or {}
    except (OSError, ValueError, AttributeError):
        return False
    return str(metadata.get("format", "")).startswith(FORMAT_FAMILY)


# -- load ------------------------------------------------------------------------------------
def read_manifest(directory, step=None) -> dict:
    """The manifest of the checkpoint in `directory`, verified (format, checksum, step)."""
    path = Path(directory) / MANIFEST
    if not path.exists():
        raise CheckpointError(f"no checkpoint in {directory}: {MANIFEST} is missing")
    try:
        manifest = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"{path} is not valid JSON (truncated or edited): {exc}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        found = manifest.get("format") if isinstance(manifest, dict) else type(manifest).__name__
        raise CheckpointError(f"{path}: format {found!r}, expected {FORMAT!r}")
    if manifest.get("checksum") != manifest_checksum(manifest):
        raise CheckpointError(f"{path}: checksum mismatch, the manifest was edited or is "
                              "corrupted")
    if step is not None and manifest.get("step") != int(step):
        raise CheckpointError(f"{path} holds step {manifest.get('step')}, expected step {step}")
    return manifest


def load_checkpoint(cg, directory, strict: bool = True, step=None) -> dict:
    """Bind the persistent tensors of `cg` from a checkpoint written by save_checkpoint,
    whatever rank count or preset wrote it; collective. The manifest's checksum, its
    step (if `step` is given) and every tile's sha256 are verified. With strict=False,
    tensors the checkpoint lacks are left as they are. Any error is raised as one
    CheckpointError on every rank, and nothing is bound unless every rank read
    everything. Returns the manifest."""
    manifest, tiles, error = None, {}, None
    try:
        manifest = read_manifest(directory, step)
        tiles = read_local_tiles(cg, Path(directory), manifest, strict)
    except Exception as exc:   # noqa: BLE001 - every failure becomes the collective verdict
        error = f"rank {cg.world.rank}: {describe_error(exc)}"
    verdicts = gather(cg.world, (error, manifest and manifest.get("checksum")),
                      f"load_checkpoint({directory}): every rank reading its tiles")
    errors = [e for e, _ in verdicts if e]
    if errors:   # every rank sees every error: all raise the same one
        raise CheckpointError(f"load_checkpoint({directory}): " + "; ".join(errors))
    if len({checksum for _, checksum in verdicts}) > 1:
        raise CheckpointError(f"load_checkpoint({directory}): the ranks read different "
                              "manifests (is the directory on a file system they all share?)")
    for (name, rank), rank_tiles in tiles.items():
        cg.bind_tiles(name, rank_tiles, rank=rank)
    return manifest


def describe_error(exc) -> str:
    """A load failure in words: our own errors as they are, others with their type."""
    if isinstance(exc, CheckpointError):
        return str(exc)
    if isinstance(exc, (KeyError, TypeError, IndexError)):
        return f"the manifest is malformed ({type(exc).__name__}: {exc})"
    return f"{type(exc).__name__}: {exc}"


def read_local_tiles(cg, directory, manifest, strict) -> dict:
    """{(tensor, rank): {coord: array}} of the tiles the local ranks hold."""
    names = tensors_to_load(cg, manifest, strict)
    reader, tiles = TileReader(directory, manifest), {}
    try:
        for name in names:
            for rank in cg.world.local_ranks():
                tiles[(name, rank)] = {coord: reader.assemble(name, cg.plan.tilings[name], coord)
                                       for coord in cg.local_tiles(name, rank)}
    finally:
        reader.close()
    return tiles


def tensors_to_load(cg, manifest, strict) -> list:
    wanted = [t for t in cg.graph.tensors() if t.persistent]
    missing = [t.name for t in wanted if t.name not in manifest["tensors"]]
    if missing and strict:
        raise CheckpointError(f"checkpoint lacks persistent tensor(s) {missing} of graph "
                              f"{cg.graph.name!r} (pass strict=False to leave them as they are)")
    for tensor in wanted:
        saved = manifest["tensors"].get(tensor.name)
        if saved and (tuple(saved["shape"]), saved["dtype"]) != (tensor.shape, tensor.dtype):
            raise CheckpointError(f"checkpoint has {tensor.name}{saved['shape']}:{saved['dtype']}"
                                  f", the graph has {tensor.describe()}")
    return [t.name for t in wanted if t.name in manifest["tensors"]]


class TileReader:
    """Reads checkpoint tiles (each verified once) and cuts new tiles out of them."""

    def __init__(self, directory, manifest):
        self.directory, self.manifest = directory, manifest
        self.records = {(r["tensor"], tuple(r["coord"])): r for r in manifest["tiles"]}
        self.files, self.cache = {}, {}

    def assemble(self, name, spec, coord) -> np.ndarray:
        """Tile `coord` of the target tiling `spec`, from the saved tiles it overlaps."""
        saved = [DimensionTiling.explicit(b) for b in self.manifest["tensors"][name]["tiling"]]
        low, high = spec.tile_offset(coord), [s.stop for s in spec.tile_slices(coord)]
        result = np.empty(spec.tile_shape(coord), dtype=self.dtype_of(name), order="F")
        ranges = [range(d.tile_of(lo), d.tile_of(hi - 1) + 1) for d, lo, hi in
                  zip(saved, low, high)]
        for source in np.ndindex(*[len(r) for r in ranges]):
            source = tuple(r[i] for r, i in zip(ranges, source))
            start = [d.boundaries[i] for d, i in zip(saved, source)]
            stop = [d.boundaries[i + 1] for d, i in zip(saved, source)]
            cut_low = [max(a, b) for a, b in zip(low, start)]
            cut_high = [min(a, b) for a, b in zip(high, stop)]
            into = tuple(slice(a - o, b - o) for a, b, o in zip(cut_low, cut_high, low))
            out_of = tuple(slice(a - o, b - o) for a, b, o in zip(cut_low, cut_high, start))
            result[into] = self.tile(name, source)[out_of]
        return result

    def dtype_of(self, name):
        return storage_dtype(self.manifest["tensors"][name]["dtype"])

    def tile(self, name, coord) -> np.ndarray:
        key = (name, tuple(coord))
        if key not in self.cache:
            record = self.records.get(key)
            if record is None:
                raise CheckpointError(f"checkpoint is incomplete: no record of tile "
                                      f"{tile_key(name, coord)}")
            if record.get("key") != tile_key(name, coord):
                # the sha256 would match the other tile's bytes: a wrong value, no error
                raise CheckpointError(f"the manifest's record of tile {tile_key(name, coord)} "
                                      f"points at tile {record.get('key')!r}: the manifest "
                                      "is inconsistent")
            try:
                array = self.open(record["file"]).get_tensor(record["key"])
            except Exception as exc:   # safetensors raises its own error types
                raise CheckpointError(f"tile {record['key']} of {self.directory / record['file']}"
                                      f" is unreadable: {exc}") from None
            if checksum(array) != record["sha256"]:
                raise CheckpointError(f"checksum mismatch for tile {record['key']} in "
                                      f"{self.directory / record['file']}: the file is corrupted")
            expected = self.saved_tile_shape(name, coord)
            if tuple(array.shape) != expected:   # the same bytes in another shape pass sha256
                raise CheckpointError(f"tile {record['key']} of {self.directory / record['file']}"
                                      f" has shape {list(array.shape)}, the manifest's tiling "
                                      f"says {list(expected)}")
            self.cache[key] = array
        return self.cache[key]

    def saved_tile_shape(self, name, coord) -> tuple:
        tiling = self.manifest["tensors"][name]["tiling"]
        return tuple(bounds[i + 1] - bounds[i] for bounds, i in zip(tiling, coord))

    def open(self, filename):
        if filename not in self.files:
            try:
                path = inside(self.directory, filename, f"{self.directory / MANIFEST}")
            except OutsideFolder as exc:
                raise CheckpointError(str(exc)) from None
            if not path.exists():
                raise CheckpointError(f"checkpoint shard {path} is missing")
            try:
                self.files[filename] = safe_open(str(path), framework="numpy")
            except Exception as exc:   # safetensors raises its own error types
                raise CheckpointError(f"checkpoint shard {path} is unreadable: {exc}") from exc
        return self.files[filename]

    def close(self):
        self.files.clear()
