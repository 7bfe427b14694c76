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
    import kernels
    if device == "auto":
        device = "cuda" if cuda_available() else "cpu"
    if device == "cpu":
        return Device("cpu", np, kernels.get_kernels("cpu"))
    if device == "cuda":
        import cupy
        cupy.cuda.Device(local_rank % cupy.cuda.runtime.getDeviceCount()).use()
        return Device("cuda", cupy, kernels.get_kernels("cuda"))
    raise ValueError(f"unknown device {device!r}; expected 'auto', 'cpu' or 'cuda'")
