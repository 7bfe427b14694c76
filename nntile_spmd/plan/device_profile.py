"""Plan layer: what the planner and the simulator know of a device: the host cost of
launching one task, memory bandwidth, peak FLOP/s and memory size, per named profile.

A task costs launch + the longer of its FLOPs at peak and its bytes at the memory
bandwidth (a roofline). On a GPU the launch is host time spent for every task however
small, so the default tiling there makes tiles as large as the distribution allows
(plan/tile_budget.py); on a CPU a 1 MiB tile already amortises the executor's
per-task cost. The CPU profile measured on this machine comes from a calibration
file (simulate/machine.py, `cpu_profile`). Imports nothing of the project.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

KINDS = ("cpu", "gpu")


@dataclass(frozen=True)
class DeviceProfile:
    """One device's costs: per-task launch seconds, bytes/s, FLOP/s, memory bytes."""

    name: str
    kind: str                      # "cpu" or "gpu"
    launch_s: float                # host seconds to start one task's kernel
    bandwidth_bytes_per_s: float   # device memory bandwidth
    peak_flops: float              # FLOP/s of fp32 gemm at its best
    memory_bytes: int              # memory one rank may fill

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"DeviceProfile {self.name!r}: kind must be one of {KINDS}, "
                             f"got {self.kind!r}")
        for field in ("launch_s", "bandwidth_bytes_per_s", "peak_flops", "memory_bytes"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ValueError(f"DeviceProfile {self.name!r}: {field} must be a positive "
                                 f"number, got {value!r}")

    @property
    def whole_tiles(self) -> bool:
        """Does every task pay a launch that small tiles cannot amortise (a GPU)?"""
        return self.kind == "gpu"

    def task_seconds(self, flops: int, nbytes: int) -> float:
        """Launch, then the longer of computing at peak and moving the task's bytes."""
        return self.launch_s + max(flops / self.peak_flops,
                                   nbytes / self.bandwidth_bytes_per_s)

    def within(self, memory_bytes) -> DeviceProfile:
        """This device with at most `memory_bytes` usable (a memory budget); None: as is."""
        if memory_bytes is None or memory_bytes >= self.memory_bytes:
            return self
        return replace(self, memory_bytes=int(memory_bytes))

    def __repr__(self) -> str:
        return (f"DeviceProfile({self.name}: {self.kind}, {self.launch_s * 1e6:g} us launch, "
                f"{self.bandwidth_bytes_per_s / 1e9:g} GB/s, {self.peak_flops / 1e12:g} "
                f"TFLOP/s, {self.memory_bytes / (1 << 30):g} GiB)")


GiB = 1 << 30

# GPU rows, measured where a GPU run measured them (docs/benchmarks.md, "GPU: measured
# on an NVIDIA H200"): the launch is the host time per task of a GPT-2 124M step under
# CuPy (the same Python and CuPy drive either GPU), the peak one cupy.matmul's fp32
# FLOP/s on that GPU (no tensor cores); the bandwidths are datasheet values (SXM parts).
# The "cpu" row is the uncalibrated default (simulate/machine.py's MachineModel
# defaults); a calibration file gives this machine's numbers (cpu_profile).
PROFILES = {
    "cpu": DeviceProfile("cpu", "cpu", 3e-6, 10e9, 50e9, 16 * GiB),
    "h100": DeviceProfile("h100", "gpu", 33e-6, 3.35e12, 50.7e12, 80 * GiB),
    "h200": DeviceProfile("h200", "gpu", 33e-6, 4.8e12, 51.0e12, 141 * GiB),
}
# compile's device names -> the profile they plan for ($NNTILE_SPMD_GPU_PROFILE names
# another GPU row: runtime/device_tiling.py)
DEVICE_PROFILE_OF = {"cpu": "cpu", "cuda": "h100"}


def device_profile(device) -> DeviceProfile:
    """The profile of a device name ("cpu", "cuda"), a profile name ("h100"), or a
    DeviceProfile as it is."""
    if isinstance(device, DeviceProfile):
        return device
    name = DEVICE_PROFILE_OF.get(device, device)
    if not isinstance(name, str) or name not in PROFILES:
        raise ValueError(f"unknown device profile {device!r}; expected a DeviceProfile or "
                         f"one of {sorted(PROFILES) + sorted(DEVICE_PROFILE_OF)}")
    return PROFILES[name]
