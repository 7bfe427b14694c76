"""Models layer: local Hugging Face model folders in and out (config.json plus
model.safetensors or the sharded model.safetensors.index.json), the Hub's key names.

Reads and writes files only; the model (hf_weights.py) turns the arrays into bound
tensors. Imports no plan, runtime or MPI: a CompiledGraph is used through its world's
`agree` and `rank` only, so that rank 0 writes and every rank hears whether it worked.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from ..folder_paths import inside
from ..private_files import replace_atomically

CONFIG = "config.json"
WEIGHTS = "model.safetensors"
INDEX = "model.safetensors.index.json"
TORCH_WEIGHTS = "pytorch_model.bin"
TORCH_INDEX = "pytorch_model.bin.index.json"
# transformers refuses a safetensors file whose metadata names no known format
METADATA = {"format": "pt"}
NUMPY_TO_HF_DTYPE = {np.dtype(np.float32): "float32", np.dtype(np.float64): "float64",
                     np.dtype(np.float16): "float16"}


class PretrainedError(ValueError):
    """A model folder that cannot be read as asked (named file and reason)."""


# -- reading ---------------------------------------------------------------------------------
def read_config(path, model_type) -> SimpleNamespace:
    """config.json of the folder `path` as attributes, refusing another model type
    (`model_type`: one name, or a tuple of the names accepted)."""
    folder = Path(path)
    if not folder.is_dir():
        raise PretrainedError(f"{folder}: not a folder (a local Hugging Face model folder "
                              "with config.json is expected; nothing is downloaded)")
    config_path = folder / CONFIG
    if not config_path.is_file():
        raise PretrainedError(f"{folder}: no {CONFIG} (is it a Hugging Face model folder?)")
    values = read_json_object(config_path)
    found = values.get("model_type")
    accepted = (model_type,) if isinstance(model_type, str) else model_type
    if found not in accepted:
        expected = repr(model_type) if isinstance(model_type, str) else \
            " or ".join(map(repr, model_type))
        raise PretrainedError(f"{config_path}: model_type {found!r}, expected {expected}")
    return SimpleNamespace(**values)


def read_weights(path) -> dict:
    """{HF name: ndarray} of model.safetensors (or of every shard its index names), else
    of pytorch_model.bin (or its shards), read by torch with weights_only=True."""
    folder = Path(path)
    for single, index, read in weight_files():
        if (folder / single).is_file():
            return read(folder / single)
        if (folder / index).is_file():
            weight_map = read_json_object(folder / index).get("weight_map")
            if not isinstance(weight_map, dict):
                raise PretrainedError(f"{folder / index}: no \"weight_map\" object of tensor "
                                      "names to shard files")
            shards = [inside(folder, shard, f"{folder / index}'s weight_map")
                      for shard in sorted(set(weight_map.values()))]
            arrays = {}
            for shard in shards:     # every name checked before any file is read
                arrays |= read(shard)
            return arrays
    raise PretrainedError(f"{folder}: no weights: none of {WEIGHTS}, {INDEX}, {TORCH_WEIGHTS}, "
                          f"{TORCH_INDEX}")


def weight_files() -> tuple:
    """A folder's weight files, the first found wins: (one file, index of shards, reader)."""
    return ((WEIGHTS, INDEX, read_safetensors), (TORCH_WEIGHTS, TORCH_INDEX, read_torch_pickle))


def read_torch_pickle(file: Path) -> dict:
    """The tensors of a pytorch_model.bin as arrays (bf16 as fp32), through torch.load with
    weights_only=True: its unpickler builds tensors and plain containers only, never
    calls what the file names, so a file cannot run code."""
    try:
        import torch
    except ImportError:
        raise PretrainedError(f"{file}: a PyTorch pickle; install torch to read it, or save "
                              f"the weights as {WEIGHTS}") from None
    try:
        state = torch.load(file, map_location="cpu", weights_only=True)
    except Exception as error:   # noqa: BLE001 - the unpickler's refusals differ by version
        raise PretrainedError(f"{file}: torch.load(weights_only=True) refused it: "
                              f"{type(error).__name__}: {error}") from None
    if not isinstance(state, dict) or not all(isinstance(value, torch.Tensor)
                                              for value in state.values()):
        raise PretrainedError(f"{file}: not a state dict of tensors")
    return {name: (tensor.float() if tensor.dtype == torch.bfloat16 else tensor).numpy()
            for name, tensor in state.items()}


def read_json_object(path: Path) -> dict:
    """The JSON object in `path`; a truncated file or another JSON value is refused,
    naming the file."""
    try:
        values = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as error:
        raise PretrainedError(f"{path}: not valid JSON, truncated or edited ({error})") from None
    if not isinstance(values, dict):
        raise PretrainedError(f"{path}: holds a JSON {type(values).__name__}, an object of "
                              "fields is expected")
    return values


def read_safetensors(file: Path) -> dict:
    """The arrays of one safetensors file; bf16 as ml_dtypes' bfloat16, a dtype NumPy
    lacks otherwise through torch to fp32."""
    import ml_dtypes  # noqa: F401 - safetensors' NumPy reader knows bf16 only once it is loaded
    from safetensors import safe_open
    try:
        with safe_open(str(file), framework="np") as handle:
            return {key: handle.get_tensor(key) for key in handle.keys()}
    except TypeError:   # a dtype NumPy lacks even with ml_dtypes: torch reads it, if installed
        try:
            import torch  # noqa: F401  (only to read such files)
        except ImportError:
            raise PretrainedError(f"{file}: holds tensors of a dtype NumPy cannot hold; "
                                  "install torch to read them") from None
        with safe_open(str(file), framework="pt") as handle:
            return {key: handle.get_tensor(key).float().numpy() for key in handle.keys()}


# -- writing ---------------------------------------------------------------------------------
def write_folder(path, config: dict, arrays: dict) -> Path:
    """Write model.safetensors, then config.json, into the folder `path`, each file
    atomically (a temporary file beside it, fsync, rename): a reader sees each file old
    or new, never half written. Every other file of the folder (tokenizer.json, a
    README, the files of the model it was loaded from) is kept."""
    from safetensors.numpy import save as safetensors_bytes
    target = Path(path)
    target.mkdir(parents=True, exist_ok=True)
    weights = safetensors_bytes({name: np.ascontiguousarray(a) for name, a in arrays.items()},
                                metadata=METADATA)
    text = json.dumps(config, indent=2, sort_keys=True) + "\n"
    for name, data in ((WEIGHTS, weights), (CONFIG, text.encode())):
        replace_atomically(target / name, data, mode=None, durable=True)
    return target


def save_on_rank_zero(cg, path, config: dict, arrays: dict) -> Path:
    """Rank 0 writes the folder; every rank raises if it failed (a collective verdict)."""
    world = cg.world
    error = None
    if world.rank == 0:
        try:
            write_folder(path, config, arrays)
        except Exception as exc:   # reported to every rank below, so none hangs
            error = f"rank 0 could not write {path} ({exc!r})"
    errors = [e for e in world.agree(error, f"save_pretrained({path})") if e]
    if errors:
        raise PretrainedError("; ".join(errors))
    return Path(path)


def hf_dtype_name(arrays: dict) -> str:
    """The torch dtype name config.json records for these arrays."""
    dtype = next(iter(arrays.values())).dtype
    return NUMPY_TO_HF_DTYPE.get(dtype, "float32")
