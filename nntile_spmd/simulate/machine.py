"""Simulator: the machine constants a replay needs, as measured by calibration.

A task of an op of type k on tiles of `work` units (its FLOPs, or the bytes it
touches for ops that count no FLOPs) takes ``overhead + a + b * work`` seconds,
with (a, b) measured per op type and per BLAS/numba thread count. A message
between nodes takes ``latency + bytes / bandwidth`` to arrive; within a node it is
there after ``latency`` and moves as the receiver copies it. Sending and receiving
a tile also cost the ranks CPU time: ``send_a + send_b * bytes`` and
``recv_a + recv_b * bytes`` (the copy). The file is JSON so a user can read and
edit it.

A model made for a device (`MachineModel.for_device("h100")`, plan/device_profile.py)
prices the op types it has no calibration for by the device's roofline: launch + the
longer of FLOPs at peak and bytes at its memory bandwidth. `cpu_profile` turns a
calibration into this machine's DeviceProfile.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field, replace
from typing import NamedTuple

from ..plan.device_profile import PROFILES, DeviceProfile, device_profile
from ..plan.instructions import Exec
from ..runtime.executor import SPIN_SECONDS

# How the ranks of a node use its cores (MachineModel.core_sharing), the one switch of
# the shared-core model (replay.Replay): "own" is how jobs are launched, a rank per
# core or GPU (or cores // ranks each); the other two are a machine with more ranks
# than cores, such as a test VM: "node" unbound ranks, which the scheduler spreads
# over the node's cores, "bound" ranks bound to a core each (`mpiexec -bind-to core`:
# rank r on core r mod cores), taking turns there (turns.py) when core_turn_s is set.
CORE_SHARING = ("own", "node", "bound")

# Used for op types the calibration never saw: 1 GFLOP/s or 1 GB/s, 5 us a call.
# Deliberately pessimistic, and reported as "uncalibrated" by the replay.
FALLBACK_RATE = (5e-6, 1e-9)


class MessageCost(NamedTuple):
    """CPU seconds of one SEND or RECV through the runtime's transport."""
    fixed_s: float = 0.0
    per_byte_s: float = 0.0

    def seconds(self, nbytes: int) -> float:
        return self.fixed_s + self.per_byte_s * nbytes


@dataclass
class MachineModel:
    """Seconds per task, per unit of work and per message on one machine."""

    cores: int = 1
    task_overhead_s: float = 3e-6          # executor cost per task outside the kernel
    latency_s: float = 5e-6
    bandwidth_bytes_per_s: float = 5e9
    # CPU seconds of one SEND and one RECV through the runtime's transport, fixed
    # part and per byte (pingpong.message_costs); 0 in files that predate them
    send_cpu: MessageCost = MessageCost()   # a (fixed, per byte) pair is read as one
    recv_cpu: MessageCost = MessageCost()
    # "own" | "node" | "bound" (CORE_SHARING): whether ranks share cores at all. The
    # fields after it up to switch_penalty_s are read only when they do
    core_sharing: str = "own"
    # How long a waiting rank polls before it sleeps: the runtime's receives and
    # collectives spin this long (runtime/executor.wait_with_deadline), then back off
    # to sleeps; a blocking mpi4py collective polls throughout (float("inf"))
    poll_s: float = SPIN_SECONDS
    # How long the scheduler lets one of two computing processes run on a shared
    # core before the other (turns.measure_turn); 0: they share it evenly
    core_turn_s: float = 0.0
    # A rank polling for a message on a shared core keeps it until it has had as much
    # CPU as its core-mate: the CPU it then spins for, over that lead
    # (pingpong.spin_share; 1 for ranks in sessions of their own under Linux's
    # autogroups, as mpiexec starts them; near 0 where yields hand the core over).
    # 0 in files that predate it: a waiting rank leaves the core at once
    spin_share: float = 0.0
    # Extra CPU seconds a rank spends when it gets a shared core back after another
    # rank computed there: its data was evicted from the core's caches
    # (shared_core.switch_penalty); 0 in files that predate it
    switch_penalty_s: float = 0.0
    # op type -> {str(threads): [a_seconds, b_seconds_per_unit]}
    op_types: dict = field(default_factory=dict)
    source: str = "defaults"               # what produced these numbers
    # A rank that has finished its program waits for the others in the step's closing
    # collective (a loss or statistics allreduce), polling for poll_s like any wait
    # (with core sharing on); False: it leaves its core at once.
    finished_ranks_poll: bool = True
    # the fields of a DeviceProfile whose roofline prices the op types op_types lacks;
    # None: the CPU model above (FALLBACK_RATE for those)
    device: dict | None = None

    @classmethod
    def for_device(cls, device, **fields) -> MachineModel:
        """A model of one rank per `device` (a profile name, "cuda", a DeviceProfile):
        every task priced by its roofline, nothing calibrated."""
        profile = device_profile(device)
        return cls(task_overhead_s=0.0, device=asdict(profile),
                   source=f"device profile {profile!r}", **fields)

    @property
    def profile(self):
        """The DeviceProfile tasks are priced by, or None."""
        return None if self.device is None else DeviceProfile(**self.device)

    def exec_seconds(self, op_type: str, instruction: Exec, meta, threads: int) -> float:
        """One EXEC: calibrated rate of its op type, else the device's roofline."""
        profile = self.profile
        if profile is None or op_type in self.op_types:
            return self.task_seconds(op_type, task_work(instruction, meta), threads)
        nbytes = sum(meta[key].nbytes for key in instruction.keys)
        return self.task_overhead_s + profile.task_seconds(instruction.flops, nbytes)

    def __post_init__(self):
        self.send_cpu, self.recv_cpu = MessageCost(*self.send_cpu), MessageCost(*self.recv_cpu)
        if self.core_sharing not in CORE_SHARING:
            raise ValueError(f"MachineModel: core_sharing must be one of {CORE_SHARING}, "
                             f"got {self.core_sharing!r}")

    def calibrated(self, op_type: str) -> bool:
        """Is `op_type` priced by a measurement or a device profile (not FALLBACK_RATE)?"""
        return op_type in self.op_types or self.device is not None

    def threads_per_rank(self, ranks_on_node: int) -> int:
        """The runtime's default: the node's cores split among its ranks, at least 1."""
        return max(1, self.cores // max(1, ranks_on_node))

    def rate(self, op_type: str, threads: int) -> tuple:
        """(a, b) for `op_type` at the calibrated thread count nearest `threads`."""
        by_threads = self.op_types.get(op_type)
        if not by_threads:
            return FALLBACK_RATE
        nearest = min(by_threads, key=lambda t: (abs(int(t) - threads), -int(t)))
        return tuple(by_threads[nearest])

    def task_seconds(self, op_type: str, work: int, threads: int) -> float:
        a, b = self.rate(op_type, threads)
        return self.task_overhead_s + a + b * work

    def message_seconds(self, nbytes: int, same_node: bool = False) -> float:
        """From the SEND until the message can be received."""
        if same_node:
            return self.latency_s        # the receiver's copy is its recv_cpu
        return self.latency_s + nbytes / self.bandwidth_bytes_per_s

    def send_seconds(self, nbytes: int) -> float:
        return self.send_cpu.seconds(nbytes)

    def recv_seconds(self, nbytes: int) -> float:
        return self.recv_cpu.seconds(nbytes)

    def at_speed(self, factor: float) -> MachineModel:
        """This machine running every CPU cost `factor` times slower: kernels, the
        executor's per-task cost, the CPU of SENDs and RECVs, the cache reloads after
        a core switch (speed.py measures the factor of a run). Message latency and
        bandwidth stay as calibrated."""
        return replace(
            self, task_overhead_s=self.task_overhead_s * factor,
            switch_penalty_s=self.switch_penalty_s * factor,
            send_cpu=MessageCost(*(c * factor for c in self.send_cpu)),
            recv_cpu=MessageCost(*(c * factor for c in self.recv_cpu)),
            op_types={op_type: {threads: [a * factor, b * factor]
                                for threads, (a, b) in by_threads.items()}
                      for op_type, by_threads in self.op_types.items()},
            source=f"{self.source}, at {factor:.3g}x its CPU time")

    def save(self, path) -> None:
        """Write atomically, so a killed calibration never leaves half a file."""
        temporary = f"{path}.tmp{os.getpid()}"
        with open(temporary, "w") as out:
            json.dump(asdict(self), out, indent=1, sort_keys=True)
        os.replace(temporary, path)

    @classmethod
    def load(cls, path) -> MachineModel:
        with open(path) as source:
            data = json.load(source)
        unknown = set(data) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(f"{path}: unknown machine-model fields {sorted(unknown)}")
        return cls(**data)     # JSON's lists become MessageCosts in __post_init__


def cpu_profile(machine: MachineModel, memory_bytes=None) -> DeviceProfile:
    """This machine's DeviceProfile from a calibration: the launch is the executor's
    per-task cost plus gemm's fixed part, the peak gemm's FLOP/s at the most threads
    calibrated, the bandwidth that of a received tile's copy (recv_cpu)."""
    default = PROFILES["cpu"]
    gemm = machine.op_types.get("gemm")
    if not gemm:
        raise ValueError(f"cpu_profile: the machine model ({machine.source}) has no "
                         "calibrated gemm")
    a, b = gemm[max(gemm, key=int)]
    per_byte = machine.recv_cpu.per_byte_s
    return DeviceProfile("cpu (calibrated)", "cpu", max(machine.task_overhead_s + a, 1e-9),
                         1.0 / per_byte if per_byte > 0 else default.bandwidth_bytes_per_s,
                         1.0 / b if b > 0 else default.peak_flops,
                         memory_bytes or default.memory_bytes)


# A fused task (plan/fusion.py: a chain of elementwise ops on one tile, its op name
# theirs joined by "+") reads each tile once: one op type for all of them.
FUSED = "fused"


def op_type_of(types: dict, op_name: str) -> str:
    """The op type of an EXEC's op (`types`: op name -> op type of the graph)."""
    return FUSED if "+" in op_name else types[op_name]


def task_work(instruction: Exec, meta) -> int:
    """FLOPs of a task, or for tasks that count none the bytes of its tiles."""
    if instruction.flops:
        return instruction.flops
    return sum(meta[key].nbytes for key in instruction.keys)
