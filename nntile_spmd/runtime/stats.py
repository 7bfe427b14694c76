"""Runtime layer: what one rank measured during one execute() (ExecutionStats).

Nothing here is copied from the plan: bytes are counted by the transports from
the buffers handed to MPI (Status counts on the receive side), peak bytes by the
tile store from the arrays it really allocated, time by the executor's clock.
`compare_with_plan` sets these beside the plan's numbers, so a disagreement is
a real finding (a tile of the wrong size, a leaked buffer, a lost message).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import NamedTuple


class Traffic:
    """Counted by the innermost transport, per buffer handed to (or filled by) MPI."""

    __slots__ = ("sent_bytes", "sent_messages", "received_bytes", "received_messages")

    def __init__(self):
        self.sent_bytes = self.sent_messages = 0
        self.received_bytes = self.received_messages = 0


# Per-op accumulator slots of the executor (a list per op name: cheap to bump).
TASKS, FLOPS, KERNEL_S, WAIT_S, SENT, RECEIVED = range(6)


class Event(NamedTuple):
    """One timed interval of an executor, recorded when profiling (runtime/profile.py):
    a kernel ("task"), or a wait ("wait": for a receive, or for worker tasks)."""

    kind: str
    op: str             # the op's name (a receive: the op that consumes the tile)
    kernel: str         # a wait: "recv", "look-ahead" or "dependency"
    start: float        # perf_counter seconds
    end: float
    thread: int         # 0: the executor thread; workers count from 1
    cpu_s: float        # the thread's CPU time over the interval


def new_totals() -> list:
    return [0, 0, 0.0, 0.0, 0, 0]


@dataclass
class OpTotals:
    """Measured totals of a group of ops (one phase or one op type)."""

    tasks: int = 0               # EXEC instructions run
    flops: int = 0               # the FLOP counts of those tasks (counted, not measured)
    kernel_ms: float = 0.0       # executor clock around the kernel calls
    wait_ms: float = 0.0         # blocked waiting for receives these ops consume
    bytes_sent: int = 0          # messages of tiles these ops consume (sender side)
    bytes_received: int = 0

    def add(self, totals: list) -> None:
        self.tasks += totals[TASKS]
        self.flops += totals[FLOPS]
        self.kernel_ms += totals[KERNEL_S] * 1e3
        self.wait_ms += totals[WAIT_S] * 1e3
        self.bytes_sent += totals[SENT]
        self.bytes_received += totals[RECEIVED]


@dataclass
class ExecutionStats:
    """One rank's measurements of its last execute() (NNTile 2.0's ExecutionStats).

    Bytes, peaks and times are measured; flops_executed is counted: the FLOP counts of
    the tasks this rank ran, added up (no hardware counter), so it differs from the
    plan only when a task ran that was not planned or a planned one did not run.
    Dict-style access (`stats["peak_bytes"]`) is kept for older callers.
    """

    rank: int = 0
    phases: tuple = ()
    bytes_transferred: int = 0   # bytes of the buffers this rank handed to MPI sends
    bytes_received: int = 0      # bytes MPI reported received (Status counts)
    messages_sent: int = 0
    messages_received: int = 0
    flops_executed: int = 0      # counted: the FLOP counts of the tasks run, added up
    execution_time_ms: float = 0.0
    peak_bytes: int = 0          # most bytes the tile store held (spare buffers included)
    # the same, minus tiles whose FREE was passed while a task still read them
    # (threaded executor) or a send of them was in flight (parked): the peak had
    # every FREE taken effect in program order
    in_order_peak_bytes: int = 0
    staging_peak_bytes: int = 0  # most host bytes in GPU staging buffers (0 on the CPU)
    # most bytes of tile versions parked at once while their sends were in flight
    # (runtime/executor.py retire_sends), over the rank's executes so far: peak_bytes
    # exceeds in_order_peak_bytes (= the planned peak) by at most this
    parked_peak_bytes: int = 0
    by_phase: dict = field(default_factory=dict)     # phase -> OpTotals
    by_op_type: dict = field(default_factory=dict)   # op type -> OpTotals
    # planned offloading: bytes EVICTs copied out of, PREFETCHes into, device memory
    bytes_evicted: int = 0
    bytes_prefetched: int = 0
    # the executor thread's CPU time during execution_time_ms: less where it slept in
    # a wait or the scheduler ran another process on its core
    execution_cpu_ms: float = 0.0

    def __getitem__(self, name):
        if name not in FIELD_NAMES:
            raise KeyError(f"ExecutionStats has no field {name!r}; fields: {FIELD_NAMES}")
        return getattr(self, name)

    def keys(self):
        return list(FIELD_NAMES)

    def as_dict(self) -> dict:
        return asdict(self)


FIELD_NAMES = tuple(f.name for f in fields(ExecutionStats))


def build_stats(rank, phases, ops_by_name, executor, store, staging,
                elapsed_s) -> ExecutionStats:
    """Gather one rank's counters after its executor finished."""
    traffic = executor.traffic
    stats = ExecutionStats(rank, phases, traffic.sent_bytes, traffic.received_bytes,
                           traffic.sent_messages, traffic.received_messages,
                           executor.flops, elapsed_s * 1e3, store.peak, store.in_order_peak,
                           staging.peak if staging is not None else 0)
    stats.parked_peak_bytes = store.parked_peak
    stats.execution_cpu_ms = executor.busy_cpu_s * 1e3
    if store.offload is not None:
        stats.bytes_evicted, stats.bytes_prefetched = store.offload.written, store.offload.read
    for op_name, totals in executor.per_op.items():
        op = ops_by_name.get(op_name)
        if op is None:   # a fused task (plan/fusion.py): "op_a+op_b", under its chain's types
            ops = [ops_by_name[name] for name in op_name.split("+")]
            op_type = "fused(" + "+".join(o.op_type for o in ops) + ")"
            stats.by_phase.setdefault(ops[0].phase, OpTotals()).add(totals)
            stats.by_op_type.setdefault(op_type, OpTotals()).add(totals)
            continue
        stats.by_phase.setdefault(op.phase, OpTotals()).add(totals)
        stats.by_op_type.setdefault(op.op_type, OpTotals()).add(totals)
    return stats


class Planned(NamedTuple):
    """A figure the plan predicts exactly: the CompiledGraph method that plans it, its
    meaning in messages, and the ExecutionStats field that measures it."""

    method: str
    label: str
    measured: str


# name -> the pairs that must agree. The plan's memory model frees each tile at its FREE:
# the serial executor's peak (in_order_peak_bytes == peak_bytes there) or the threaded
# one's in program order.
PLANNED = {
    "bytes_transferred": Planned("estimate_communication", "bytes sent", "bytes_transferred"),
    "bytes_received": Planned("estimate_received", "bytes received", "bytes_received"),
    "flops_executed": Planned("estimate_flops", "FLOPs", "flops_executed"),
    "peak_bytes": Planned("memory_on_rank", "peak bytes", "in_order_peak_bytes"),
}


def compare_with_plan(cg, stats: ExecutionStats) -> dict:
    """{field: (planned, measured)} for the fields the plan predicts exactly."""
    return {name: (getattr(cg, planned.method)(stats.rank, stats.phases),
                   getattr(stats, planned.measured))
            for name, planned in PLANNED.items()}


def mismatches(comparison: dict, rank: int) -> list:
    """Readable lines for the fields whose planned and measured values differ."""
    return [f"rank {rank}: {PLANNED[name].label}: planned {planned}, measured {measured}"
            for name, (planned, measured) in comparison.items() if planned != measured]
