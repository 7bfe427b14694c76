"""Runtime layer: compile's arguments beyond the graph, the communicator and the shape
bindings, checked and resolved once into one frozen CompileOptions. Planning takes its
PlanRequest (plan/plan_options.py), the device set-up and the executors the rest by
name, so no step receives a long positional list that must stay in step with another.
"""

from __future__ import annotations

import dataclasses

from ..plan.distribution import TileDistribution
from ..plan.mesh import Mesh
from ..plan.offload import ExecutionPolicy, as_policy
from ..plan.plan_options import DEFAULT_WINDOW, PlanOptions, PlanRequest, check_arguments
from ..plan.presets import as_preset
from .compile_steps import own_rank
from .device_choice import check_device_name
from .device_tiling import tiling_for_device
from .fused_kernels import resolve_fuse


@dataclasses.dataclass(frozen=True)
class CompileOptions:
    """What nt.compile / compile_async were asked (their docstring says what each means),
    with `fuse` resolved ($NNTILE_SPMD_FUSE for None) and `memory_budget` folded into
    `policy`. Planning reads the first six fields (and the device, for its tiles) and
    looks the plan up in `cache`; the world and the ranks' set-up read the rest."""

    tiling: object = None
    distribution: object = "single"
    window: int = DEFAULT_WINDOW
    deterministic: bool = False
    fuse: bool = False
    policy: ExecutionPolicy | None = None
    cache: object = None               # where plans are looked up (not part of one)
    device: str = "auto"
    threads: int | None = None         # this rank's threads
    task_threads: int | None = None    # of which run tile tasks side by side
    recv_timeout: float | None = None  # seconds a wait may last (runtime/timeouts.py)
    gpus: tuple | None = None          # ExecutionPolicy.preferred_gpus: this node's GPUs

    @classmethod
    def checked(cls, caller, graph, *, fuse=None, policy=None, memory_budget=None,
                deterministic=False, window=DEFAULT_WINDOW, device="auto", tiling=None,
                **others):
        """The options of a call of `caller` ("compile", "compile_async"), or the
        TypeError/ValueError naming the first bad argument."""
        check_device_name(device)
        deterministic = deterministic or owner_computes(caller, policy)
        check_arguments(caller, graph=graph, window=window, deterministic=deterministic,
                        fuse=fuse, tiling=tiling)
        others["distribution"] = explicitly_placed(caller, others.get("distribution", "single"),
                                                   policy)
        others["gpus"] = preferred_gpus(caller, policy)
        return cls(window=window, deterministic=bool(deterministic), fuse=resolve_fuse(fuse),
                   policy=as_policy(policy, memory_budget), device=device, tiling=tiling,
                   **others)

    def plan_request(self, world) -> PlanRequest:
        """What the plan of these options on `world` is a function of (the cache's key);
        with no tiling given, a GPU's tiles are as large as the distribution allows."""
        options = PlanOptions(window=self.window, deterministic=self.deterministic,
                              fuse=self.fuse, own_rank=own_rank(world), policy=self.policy)
        return PlanRequest(world.size, tiling_for_device(self.tiling, self.device, self.policy),
                           self.distribution, options)


def owner_computes(caller, policy) -> bool:
    """Does `policy` place every task on its output's owner (ExecutionPolicy.placement)?
    That is the deterministic plan: each sum over tiles runs on the output tile's owner
    in tile order ("owner_computes", and "explicit", which also says where some tensors'
    tiles live)."""
    if policy is None:
        return False
    return policy.placement in ("owner_computes", "explicit")


def preferred_gpus(caller, policy) -> tuple | None:
    """ExecutionPolicy.preferred_gpus as a tuple of GPU numbers, taken in turn by a
    node's ranks (runtime/device.py gpu_of); None: every GPU in turn. On the CPU it
    changes nothing."""
    gpus = None if policy is None else policy.preferred_gpus
    if gpus is None:
        return None
    if isinstance(gpus, int):
        gpus = [gpus]
    if isinstance(gpus, (str, bytes)) or not hasattr(gpus, "__iter__"):
        raise TypeError(f"{caller}: ExecutionPolicy(preferred_gpus={gpus!r}) is a list of "
                        "GPU numbers")
    gpus = tuple(gpus)
    if not gpus or not all(isinstance(g, int) and not isinstance(g, bool) and g >= 0
                           for g in gpus):
        raise ValueError(f"{caller}: ExecutionPolicy(preferred_gpus={list(gpus)}) must "
                         "name one or more GPU numbers (0, 1, ...)")
    return gpus


def explicitly_placed(caller, distribution, policy):
    """`distribution` with placement="explicit"'s {tensor: TileDistribution} on top (as
    per-tensor overrides of its preset); unchanged for the other placements."""
    mapping = None if policy is None else policy.placement_map
    if policy is None or policy.placement != "explicit":
        if mapping is not None:
            raise ValueError(f"{caller}: ExecutionPolicy(placement_map=...) is read with "
                             f"placement='explicit', not {policy.placement!r}")
        return distribution
    if not isinstance(mapping, dict) or not mapping or \
            not all(isinstance(name, str) and isinstance(value, TileDistribution)
                    for name, value in mapping.items()):
        raise ValueError(f"{caller}: ExecutionPolicy(placement='explicit') needs "
                         f"placement_map={{tensor name: TileDistribution}}, got {mapping!r}")
    if isinstance(distribution, str) and distribution == "auto":
        raise ValueError(f"{caller}: placement='explicit' places tensors on top of a "
                         "preset; distribution='auto' chooses the placement itself")
    preset = as_preset(distribution)
    if isinstance(preset, Mesh):
        raise ValueError(f"{caller}: placement='explicit' places tensors on top of a "
                         f"preset (single, ddp, fsdp, tp, ...), not the mesh {preset!r}")
    return dataclasses.replace(preset, overrides={**preset.overrides, **mapping})
