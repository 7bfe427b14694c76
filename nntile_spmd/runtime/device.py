"""Runtime layer: the compute device of a rank: array module, kernels, copies.

The CPU path never imports CuPy; what "auto" means is device_choice.py's rule
($NNTILE_SPMD_DEVICE, else cuda where a small kernel runs on a GPU). One GPU per
rank: local rank % number of GPUs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..graph.dtypes import HALF_DTYPES, storage_dtype
from ..graph.registry import REGISTRY
from .device_choice import resolve_device


@dataclass
class Device:
    name: str
    xp: object
    kernels: dict

    def storage_dtype(self, dtype):
        """The array dtype of tiles of graph dtype `dtype` (CuPy holds ml_dtypes' bfloat16
        as NumPy does)."""
        return storage_dtype(dtype)

    def copy_in(self, tile, array):
        """Write the host `array` into `tile`: a device array, or a NumPy one (CPU tiles,
        and the host slot where a GPU tile rests offloaded: offload_store.py), which
        takes the host array as it is (a CuPy array there is a TypeError)."""
        tile[...] = array if type(tile) is np.ndarray else self.xp.asarray(array)

    def to_host(self, array):
        """A host copy in the tile's own (Fortran) order: host staging hands it to MPI as
        raw bytes into the receiver's Fortran buffer (cupy.asnumpy alone gives C order,
        which arrived transposed on two GPU ranks)."""
        return array if self.xp is np else self.xp.asnumpy(array, order="F")

    def synchronize(self):
        if self.xp is not np:
            self.xp.cuda.Stream.null.synchronize()


def gpu_of(local_rank: int, count: int, preferred=None) -> int:
    """The GPU a rank of this node-local number takes among `count`: its number in
    `preferred` (ExecutionPolicy.preferred_gpus) taken round-robin, else every GPU in turn."""
    if not preferred:
        return local_rank % count
    gpu = preferred[local_rank % len(preferred)]
    if gpu >= count:
        raise ValueError(f"ExecutionPolicy(preferred_gpus={list(preferred)}): local rank "
                         f"{local_rank} would take GPU {gpu}, but this node has {count}")
    return gpu


def select_device(device, local_rank: int, gpus=None) -> Device:
    """cpu, cuda, or auto (device_choice.resolve_device); a Device is used as it is
    (tests run the GPU path on a stand-in with it: tests/stand_in_device.py). `gpus`:
    the GPUs this node's ranks take in turn (default all)."""
    import nntile_kernels
    if isinstance(device, Device):
        return device
    device = resolve_device(device)
    if device == "cpu":
        return Device("cpu", np, nntile_kernels.get_kernels("cpu"))
    import cupy
    cupy.cuda.Device(gpu_of(local_rank, cupy.cuda.runtime.getDeviceCount(), gpus)).use()
    return Device("cuda", cupy, nntile_kernels.get_kernels("cuda"))


def kernel_output_counts() -> dict:
    """{kernel name: number of outputs}, from the op registry (a combine kernel has one)."""
    counts = {}
    for spec in REGISTRY.values():
        for kernel, outputs in ((spec.kernel, spec.num_outputs), (spec.combine, 1)):
            # a kernel two ops call with different output counts writes back everything
            counts[kernel] = outputs if counts.get(kernel, outputs) == outputs else None
    return counts


def for_graph(device: Device, graph) -> Device:
    """`device`, with a kernel table that takes 16-bit tiles if `graph` has any: they
    compute in fp32 and round on store, on the CPU and the GPU alike (fp32 graphs keep
    the plain table: no per-call dtype check)."""
    if not any(t.dtype in HALF_DTYPES for t in graph.tensors()):
        return device
    from nntile_kernels.widen import widen_table
    return Device(device.name, device.xp,
                  widen_table(device.kernels, kernel_output_counts(), device.xp))
