"""Runtime layer: the fusion switch and the kernel table that runs fused EXECs.

A fused EXEC's kernel name spells its chain (nntile_kernels/fused_rules.py); its
callable is generated and compiled on first use (nntile_kernels/cpu_fused.py) and
added to a copy of the device's table, so the backend's table keeps exactly its
seed kernels. Fused loops exist for the CPU only.
"""

from __future__ import annotations

import os

from ..plan.instructions import Exec

ENV_FUSE = "NNTILE_SPMD_FUSE"


def resolve_fuse(fuse) -> bool:
    """compile(fuse=...) wins; None reads $NNTILE_SPMD_FUSE ("1" on, "0" or unset off)."""
    if fuse is not None:
        return bool(fuse)
    value = os.environ.get(ENV_FUSE, "0").strip()
    if value not in ("0", "1", ""):
        raise ValueError(f"${ENV_FUSE} must be 0 or 1, got {value!r}")
    return value == "1"


def fused_names(program) -> set:
    return {i.kernel for i in program if type(i) is Exec and i.kernel.startswith("fused[")}


def kernel_table(device, program, cache: dict) -> dict:
    """device.kernels, plus the fused kernels `program` calls (kept in `cache`)."""
    names = fused_names(program)
    if not names:
        return device.kernels
    if device.name != "cpu":
        raise NotImplementedError(
            f"fused elementwise kernels run on the CPU only; compile with fuse=False "
            f"for device {device.name!r}")
    from nntile_kernels.cpu_fused import fused_kernel
    table = cache.get("table")
    if table is None:
        table = cache["table"] = dict(device.kernels)
    for name in names - table.keys():
        table[name] = fused_kernel(name)
    return table
