"""Runtime layer: the fusion switch and the kernel table that runs fused EXECs.

A fused EXEC's kernel name spells its chain (nntile_kernels/fused_rules.py); its
callable is generated and compiled on first use (nntile_kernels/cpu_fused.py) and
added to a copy of the device's table, so the backend's table keeps exactly its
seed kernels. Generated loops exist for the CPU only; another device runs a fused
task's kernels one after another from its own table (stepwise_chain): the unfused
arithmetic, with scratch arrays (outside the tile store's accounting) for the
chain's register temporaries.
"""

from __future__ import annotations

import os

from nntile_kernels.fused_rules import parse_chain

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
    table = cache.get("table")
    if table is None:
        table = cache["table"] = dict(device.kernels)
    if device.name == "cpu":
        from nntile_kernels.cpu_fused import fused_kernel
    for name in names - table.keys():
        table[name] = (fused_kernel(name) if device.name == "cpu"
                       else stepwise_chain(name, device.kernels, device.xp))
    return table


def stepwise_chain(name, kernels, xp):
    """A fused chain run as its kernels, one call each (devices with no generated loops)."""
    steps = parse_chain(name)

    def run(*tiles, **params):
        scratch = {}

        def array(slot):
            if isinstance(slot, int):
                return tiles[slot]
            if slot not in scratch:
                scratch[slot] = xp.empty_like(tiles[0])
            return scratch[slot]
        for index, step in enumerate(steps):
            prefix = f"s{index}_"
            own = {key[len(prefix):]: value for key, value in params.items()
                   if key.startswith(prefix)}
            kernels[step.kernel](*map(array, step.inputs + step.outputs), **own)
    run.__name__ = name
    return run
