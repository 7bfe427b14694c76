"""Train layer: one safetensors file of a model's tensors under their graph names
(export_safetensors / import_safetensors), for other tools to read; the sharded,
re-tileable checkpoints of a run are checkpoint.py's. Collectives go through cg.world.
"""

from __future__ import annotations

import numpy as np
from safetensors import safe_open
from safetensors.numpy import save as safetensors_bytes

from ..graph.dtypes import storage_dtype
from .checkpoint import CheckpointError, raise_if_any, write_atomic


def export_safetensors(cg, path, names=None, metadata=None) -> list:
    """Write tensors `names` (default: the parameters) to one safetensors file under the
    model's tensor names; rank 0 writes, atomically. A tensor [m, n] is stored as the
    NumPy (m, n) array (row-major bytes, as safetensors requires). Collective."""
    if names is None:
        names = [t.name for t in cg.graph.tensors() if t.role == "parameter"]
    arrays = {}
    for name in names:
        value = cg.get_output(name, root=0)
        if value is not None:
            arrays[name] = np.array(value, order="C", copy=True)
    error = None
    if cg.world.rank == 0:
        header = {"format": "nntile_spmd", "graph": cg.graph.name} | dict(metadata or {})
        try:
            write_atomic(path, safetensors_bytes(arrays, {k: str(v) for k, v in header.items()}))
        except Exception as exc:
            error = f"rank 0 could not write {path} ({exc!r})"
    raise_if_any(cg.world, error, "export_safetensors failed")
    return list(names)


def import_safetensors(cg, path, names=None, strict: bool = True) -> list:
    """Bind tensors from a safetensors file by name (default: all it holds); with strict,
    every parameter of the graph must be in it. Every rank reads the file. Every tensor
    is read and checked (name, shape, dtype) before any is bound: a bad file changes
    nothing. Returns names."""
    with safe_open(str(path), framework="numpy") as file:
        available = list(file.keys())
        names = in_graph_order(cg.graph, available) if names is None else list(names)
        check_import(cg, path, names, available, strict)
        arrays = {name: file.get_tensor(name) for name in names}
    wrong = [mismatch(cg.graph.get_tensor(name), array) for name, array in arrays.items()]
    wrong = [text for text in wrong if text]
    if wrong:
        raise CheckpointError(f"import_safetensors({path}): nothing was bound: "
                              + "; ".join(wrong))
    for name, array in arrays.items():
        cg.bind_data(name, array)
    return names


def mismatch(tensor, array):
    """Why `array` cannot be bound to `tensor` (None if it can)."""
    want = storage_dtype(tensor.dtype)
    if array.shape != tensor.shape or array.dtype != want:
        return (f"{tensor.name} is {list(array.shape)}:{array.dtype} in the file, the graph "
                f"has {tensor.describe()} (stored as {want})")
    return None


def in_graph_order(graph, names) -> list:
    """`names` ordered like the graph's tensors (safetensors sorts its keys); unknown last."""
    order = {t.name: t.id for t in graph.tensors()}
    return sorted(names, key=lambda name: (name not in order, order.get(name, 0), name))


def check_import(cg, path, names, available, strict):
    absent = [n for n in names if n not in available]
    unknown = [n for n in names if not cg.graph.has_tensor(n)]
    if absent or unknown:
        raise CheckpointError(f"import_safetensors({path}): not in the file: {absent}; not in "
                              f"graph {cg.graph.name!r}: {unknown}")
    if strict:
        params = [t.name for t in cg.graph.tensors() if t.role == "parameter"]
        missing = [n for n in params if n not in names]
        if missing:
            raise CheckpointError(f"import_safetensors({path}): parameter(s) {missing} are not "
                                  "in the file (pass strict=False to keep their values)")
