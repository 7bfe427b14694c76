"""Runtime layer: the tiling compile plans with when the caller names none: on a GPU,
the auto tiling sized for the device (tiles as large as the distribution allows,
plan/tile_budget.py); on a CPU the plan layer's default. Resolves the device name
only (device_choice.py); imports no CuPy.
"""

from __future__ import annotations

import os

from ..plan.device_profile import device_profile
from ..plan.tiling import TilingStrategy
from .device_choice import resolve_device

GPU_PROFILE_VAR = "NNTILE_SPMD_GPU_PROFILE"   # a GPU row of plan/device_profile.PROFILES


def tiling_for_device(tiling, device, policy=None):
    """`tiling` when given; for a GPU device name, the auto tiling for its profile
    (within the offloading policy's memory budget); else None (the plan's default).
    A Device object (the tests' stand-in) plans with the default tiling."""
    if tiling is not None or not isinstance(device, str) or resolve_device(device) != "cuda":
        return tiling
    profile = device_profile(os.environ.get(GPU_PROFILE_VAR, "").strip() or "cuda")
    if not profile.whole_tiles:
        raise ValueError(f"${GPU_PROFILE_VAR} names {profile!r}, not a GPU profile")
    budget = policy.memory_budget if policy is not None else None
    return TilingStrategy.auto(device=profile.within(budget))
