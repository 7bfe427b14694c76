"""Runtime layer: where an execute's time goes, from the executors' own clocks.

`cg.profile()` runs one execute with every executor recording an event per tile
task and per wait of the executor thread (for a message, or for tasks a FREE/SEND
depends on): (kind, op, kernel, start and end on `time.perf_counter`, the thread,
and the CPU seconds the thread used meanwhile: less than end - start when the
scheduler ran another process, or the thread slept), then reports

* per op type: the summed kernel time and the number of tasks;
* per rank: wall time of the executor, time busy in kernels (summed over its
  threads), time its executor thread waited for messages and for tasks;
* a Chrome-trace JSON (https://ui.perfetto.dev opens it): one process per
  rank, one track per thread, one complete event ("ph": "X") per task.

Ranks on one node share the monotonic clock, so their tracks line up; across
nodes each rank's events are only ordered within the rank. The environment
variable NNTILE_SPMD_PROFILE=1 records every execute and rewrites the trace
(NNTILE_SPMD_PROFILE_PATH; unset, a fresh folder under the system's temp dir, never
the working directory) and its summary (same name, .txt) after each one, on rank 0
of an MPI world, which prints the path once. An execute of only some phases writes
beside it, the phases in the name (trace.forward.json, trace.optimizer.json), so a
training step's trace is not replaced by the evaluation forward that follows it.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from dataclasses import dataclass, field

from ..graph.logical_graph import PHASES

PROFILE_ENV = "NNTILE_SPMD_PROFILE"
PATH_ENV = "NNTILE_SPMD_PROFILE_PATH"
DEFAULT_PATH = "nntile_spmd_trace.json"


def profile_from_env() -> bool:
    return os.environ.get(PROFILE_ENV, "").strip() not in ("", "0")


@dataclass
class Profile:
    """Measured time of one execute, summed over the ranks of this process's view."""

    trace_path: str
    op_types: dict = field(default_factory=dict)   # op type -> {"tasks", "kernel_ms"}
    ranks: dict = field(default_factory=dict)      # rank -> {"wall_ms", "busy_ms", ...}
    trace: dict = field(default_factory=dict)      # the Chrome-trace object written

    def summary(self) -> str:
        lines = [f"{'op type':28s} {'tasks':>7s} {'kernel ms':>10s}"]
        for op_type, row in sorted(self.op_types.items(), key=lambda kv: -kv[1]["kernel_ms"]):
            lines.append(f"{op_type:28s} {row['tasks']:7d} {row['kernel_ms']:10.2f}")
        lines.append(f"{'rank':>4s} {'threads':>7s} {'wall ms':>9s} {'busy ms':>9s} "
                     f"{'busy/(wall*threads)':>19s} {'recv wait ms':>12s} {'task wait ms':>12s}")
        for rank, row in sorted(self.ranks.items()):
            capacity = row["wall_ms"] * row["threads"]
            lines.append(f"{rank:4d} {row['threads']:7d} {row['wall_ms']:9.2f} "
                         f"{row['busy_ms']:9.2f} "
                         f"{row['busy_ms'] / capacity if capacity else 0:19.2f} "
                         f"{row['recv_wait_ms']:12.2f} {row['task_wait_ms']:12.2f}")
        lines.append(f"trace: {self.trace_path}")
        return "\n".join(lines)


def build_profile(events_by_rank, wall_ms_by_rank, threads, op_types, path) -> Profile:
    """Aggregate the events of every rank ({rank: [stats.Event, ...]})."""
    profile = Profile(path)
    starts = [event.start for events in events_by_rank.values() for event in events]
    origin = min(starts) if starts else 0.0
    trace_events = []
    for rank, events in sorted(events_by_rank.items()):
        row = profile.ranks[rank] = dict(threads=threads, wall_ms=wall_ms_by_rank[rank],
                                         busy_ms=0.0, recv_wait_ms=0.0, task_wait_ms=0.0)
        trace_events.append(dict(name="process_name", ph="M", pid=rank,
                                 args=dict(name=f"rank {rank}")))
        for thread in sorted({event.thread for event in events}):
            label = "executor" if thread == 0 else f"task thread {thread}"
            trace_events.append(dict(name="thread_name", ph="M", pid=rank, tid=thread,
                                     args=dict(name=label)))
        for kind, op_name, kernel, start, end, thread, cpu in events:
            ms = (end - start) * 1e3
            if kind == "task":
                op_type = op_types.get(op_name, op_name)
                row["busy_ms"] += ms
                totals = profile.op_types.setdefault(op_type, dict(tasks=0, kernel_ms=0.0))
                totals["tasks"] += 1
                totals["kernel_ms"] += ms
                name, args = op_type, dict(op=op_name, kernel=kernel, cpu_ms=cpu * 1e3)
            else:
                row["recv_wait_ms" if kernel == "recv" else "task_wait_ms"] += ms
                name, args = f"wait ({kernel})", dict(op=op_name, cpu_ms=cpu * 1e3)
            trace_events.append(dict(name=name, cat=kind, ph="X", pid=rank, tid=thread,
                                     ts=(start - origin) * 1e6, dur=(end - start) * 1e6,
                                     args=args))
    profile.trace = dict(traceEvents=trace_events, displayTimeUnit="ms")
    return profile


def write_profile(profile: Profile) -> None:
    with open(profile.trace_path, "w") as file:
        json.dump(profile.trace, file)
    with open(os.path.splitext(profile.trace_path)[0] + ".txt", "w") as file:
        file.write(profile.summary() + "\n")


def gather_profile(cg, path) -> Profile:
    """The last execute's events of every rank (an allgather on an MPI world)."""
    local = {rank: (cg.events.get(rank, []), cg.stats[rank].execution_time_ms)
             for rank in cg.stores}
    if cg.world.size > 1 and len(cg.stores) < cg.world.size:
        merged = {}
        for part in cg.world.agree(local, "the profile's events"):
            merged.update(part)
        local = merged
    op_types = {name: op.op_type for name, op in cg.ops_by_name.items()}
    return build_profile({rank: value[0] for rank, value in local.items()},
                         {rank: value[1] for rank, value in local.items()},
                         cg.task_threads, op_types, path)


ENV_TRACE = {}   # "path": where this process writes under NNTILE_SPMD_PROFILE=1


def env_trace_path() -> str:
    """$NNTILE_SPMD_PROFILE_PATH, or a folder of its own under the temp dir (a profile
    switched on by the environment must not litter the user's working directory);
    printed once so the user finds it."""
    if "path" not in ENV_TRACE:
        chosen = os.environ.get(PATH_ENV) or os.path.join(
            tempfile.mkdtemp(prefix="nntile_spmd_profile-"), DEFAULT_PATH)
        ENV_TRACE["path"] = chosen
        print(f"nntile_spmd: {PROFILE_ENV}=1 writes the trace of every execute to {chosen} "
              f"(summary: .txt beside it; ${PATH_ENV} chooses the path)", file=sys.stderr)
    return ENV_TRACE["path"]


def phases_path(path: str, phases) -> str:
    """The trace of an execute of `phases`: `path` for all of them, else the phases in
    the name (trace.json -> trace.forward+backward.json)."""
    if tuple(phases) == PHASES:
        return path
    stem, extension = os.path.splitext(path)
    return f"{stem}.{'+'.join(phases)}{extension}"


def write_env_profile(cg, phases=PHASES) -> None:
    """After an execute under NNTILE_SPMD_PROFILE=1: rewrite its trace (collective)."""
    path = phases_path(env_trace_path(), phases) if cg.world.rank == 0 else "(rank 0 writes)"
    profile = gather_profile(cg, path)
    if cg.world.rank == 0:
        write_profile(profile)


class ProfileMixin:
    """CompiledGraph.profile()."""

    def record_profile(self, executors, phases=PHASES):
        """After an execute of `phases` with profiling on: keep the events (and write
        them under NNTILE_SPMD_PROFILE=1)."""
        self.events = {rank: executor.events for rank, executor in executors.items()}
        if profile_from_env():
            write_env_profile(self, phases)

    def profile(self, path=DEFAULT_PATH, phases=None) -> Profile:
        """Run one execute of `phases` recording every task; write the Chrome trace
        to `path` (on rank 0 of an MPI world; every rank calls this) and return the
        Profile (its summary() is a table of op types and ranks)."""
        recording = self.profiling
        self.profiling = True
        try:
            self.execute(phases)
        finally:
            self.profiling = recording
        profile = gather_profile(self, path)
        if self.world.rank == 0:
            write_profile(profile)
        return profile
