"""Runtime layer: which device a rank computes on: cpu, cuda, or auto.

`device="auto"` (compile's default) takes $NNTILE_SPMD_DEVICE when it is set (cpu,
cuda or auto: launchers, examples' --device and the CPU test tiers pin it), else
probes: cuda only if CuPy runs a small kernel on a GPU and gets its result right (a
GPU that CuPy sees but cannot use would otherwise fail at the first kernel). Where
CuPy is installed the probe's choice is said once per process on stderr, with its
reason, so a job never moves to a GPU, or off one, silently; without CuPy there is
no choice to tell (a CPU-only install stays quiet). Imports CuPy only to probe.
"""

from __future__ import annotations

import functools
import os
import sys

DEVICE_VAR = "NNTILE_SPMD_DEVICE"
DEVICE_CHOICES = ("auto", "cpu", "cuda")
NO_CUPY = "CuPy is not installed"


def check_device_name(device) -> None:
    """Raise early (before planning) on a device name that is none of DEVICE_CHOICES."""
    if isinstance(device, str) and device not in DEVICE_CHOICES:
        raise ValueError(f"unknown device {device!r}; expected one of {DEVICE_CHOICES} "
                         f"(or set ${DEVICE_VAR})")


def set_default_device(device) -> None:
    """Make `device` what device="auto" means in this process and the ranks it starts
    (examples' --device); None leaves the default as it is."""
    if device is not None:
        check_device_name(device)
        os.environ[DEVICE_VAR] = device


def resolve_device(device: str) -> str:
    """"cpu" or "cuda" for a device name; "auto" defers to $NNTILE_SPMD_DEVICE, then to
    the probe."""
    check_device_name(device)
    if device == "auto":
        device = os.environ.get(DEVICE_VAR, "").strip().lower() or "auto"
        if device not in DEVICE_CHOICES:
            raise ValueError(f"${DEVICE_VAR}={os.environ[DEVICE_VAR]!r}: expected one of "
                             f"{DEVICE_CHOICES}")
    return auto_device() if device == "auto" else device


@functools.cache
def auto_device() -> str:
    """cuda if a small kernel runs right on a GPU, else cpu; says which once, and why."""
    reason = cuda_unusable_reason()
    choice = "cpu" if reason else "cuda"
    if reason != NO_CUPY:
        print(f"nntile_spmd: device 'auto' is {choice}: "
              f"{reason or 'a test kernel ran on the GPU'} (pin it with ${DEVICE_VAR}=cpu|cuda)",
              file=sys.stderr, flush=True)
    return choice


def cuda_unusable_reason():
    """None where CuPy runs a small kernel on a GPU and gets it right, else why not."""
    try:
        import cupy
    except ImportError:
        return NO_CUPY
    try:
        if cupy.cuda.runtime.getDeviceCount() == 0:
            return "CuPy sees no GPU"
        x = cupy.arange(8, dtype=cupy.float32)
        if float((x * 2.0).sum()) != 56.0:
            return "a test kernel gave a wrong result on the GPU"
    except Exception as error:  # no driver, no device, a broken toolkit: all mean no GPU
        return f"a test kernel failed on the GPU ({type(error).__name__}: {error})"
    return None
