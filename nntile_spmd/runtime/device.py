"""Runtime layer: the compute device of a rank: array module, kernels, copies.

The CPU path never imports CuPy; "auto" picks CUDA only when CuPy imports and
sees a GPU. One GPU per rank: local rank % number of GPUs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..graph.dtypes import storage_dtype


@dataclass
class Device:
    name: str
    xp: object
    kernels: dict

    def storage_dtype(self, dtype):
        return storage_dtype(dtype)

    def copy_in(self, tile, array):
        tile[...] = self.xp.asarray(array) if self.xp is not np else array

    def to_host(self, array):
        return array if self.xp is np else self.xp.asnumpy(array)

    def synchronize(self):
        if self.xp is not np:
            self.xp.cuda.Stream.null.synchronize()


def cuda_available() -> bool:
    try:
        import cupy
        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:   # no CuPy, no driver or no device: all mean "no GPU"
        return False


def select_device(device: str, local_rank: int) -> Device:
    """cpu, cuda, or auto (cuda when a GPU is usable)."""
    import nntile_kernels
    if device == "auto":
        device = "cuda" if cuda_available() else "cpu"
    if device == "cpu":
        return Device("cpu", np, nntile_kernels.get_kernels("cpu"))
    if device == "cuda":
        import cupy
        cupy.cuda.Device(local_rank % cupy.cuda.runtime.getDeviceCount()).use()
        return Device("cuda", cupy, nntile_kernels.get_kernels("cuda"))
    raise ValueError(f"unknown device {device!r}; expected 'auto', 'cpu' or 'cuda'")


def check_storage(graph, device: Device) -> None:
    """Raise at compile, naming the tensors, if some dtype has no storage on `device`.

    Not at declaration: a graph with such a dtype (bf16) can still be planned
    (nt.build_plan: memory, traffic) — only running it needs tiles.
    """
    missing = []
    for tensor in graph.tensors():
        try:
            device.storage_dtype(tensor.dtype)
        except TypeError:
            missing.append(tensor.describe())
    if missing:
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5
                                          else "")
        raise TypeError(f"compile: no {device.name} storage for the dtype of {shown}; such "
                        "a graph can be planned (nt.build_plan) but not executed; cast it "
                        "to a stored dtype (fp32, fp16, ...)")

