"""Simulator: replay every rank's program through a discrete-event model.

Each rank runs its program in order, as the executor does: a task takes its
calibrated time, a SEND puts the message on the (sender, receiver) link as soon as
the rank reaches it, a RECV waits until that message has arrived. Every event
remembers what it waited for, so the critical path can be walked back from the
rank that finishes last.
"""

from __future__ import annotations

from collections import Counter, defaultdict, deque
from dataclasses import dataclass, field

from ..plan.instructions import Exec, Recv, Send
from .machine import MachineModel, task_work


@dataclass
class Event:
    rank: int
    start: float
    end: float
    kind: str            # "exec" | "send" | "wait"
    label: str           # op type, or the instruction that moved a tile
    cause: int           # index of the event this one waited for (-1: none)


@dataclass
class Prediction:
    """What one execute of a plan is predicted to cost, per rank and overall."""

    nranks: int
    step_s: float                       # the last rank's finish time
    finish_s: list                      # per rank
    busy_s: list                        # per rank, time in tasks
    peak_bytes: list                    # per rank, from the plan's exact memory replay
    critical_path: list                 # event indices, first to last
    events: list = field(repr=False, default_factory=list)
    uncalibrated: set = field(default_factory=set)

    @property
    def idle_s(self) -> list:
        return [finish - busy for finish, busy in zip(self.finish_s, self.busy_s)]

    def critical_summary(self) -> dict:
        """Seconds of the critical path spent per kind ("exec:gemm", "wait", ...)."""
        totals = Counter()
        for index in self.critical_path:
            event = self.events[index]
            name = f"exec:{event.label}" if event.kind == "exec" else event.kind
            totals[name] += event.end - event.start
        return dict(totals.most_common())

    def summary(self) -> str:
        lines = [f"predicted step: {self.step_s * 1e3:.2f} ms on {self.nranks} rank(s)"]
        for rank in range(self.nranks):
            lines.append(f"  rank {rank}: finish {self.finish_s[rank] * 1e3:.2f} ms, "
                         f"busy {self.busy_s[rank] * 1e3:.2f} ms, "
                         f"idle {self.idle_s[rank] * 1e3:.2f} ms, "
                         f"peak {self.peak_bytes[rank] / 2**20:.2f} MiB")
        path = self.critical_summary()
        shown = ", ".join(f"{name} {seconds * 1e3:.2f} ms" for name, seconds in
                          list(path.items())[:6])
        lines.append(f"  critical path: {len(self.critical_path)} events; {shown}")
        if self.uncalibrated:
            lines.append(f"  uncalibrated op types (fallback rates): {sorted(self.uncalibrated)}")
        return "\n".join(lines)


def predict(plan, machine: MachineModel, phases=None, ranks_per_node=None) -> Prediction:
    """Replay `plan`'s programs for `phases` on `machine` (all ranks on one node by
    default, as when they run on this machine)."""
    nranks = plan.nranks
    on_node = min(nranks, ranks_per_node or nranks)
    threads = machine.threads_per_rank(on_node)
    slowdown = machine.oversubscription(on_node)
    programs = [plan.program(rank, phases) for rank in range(nranks)]
    op_types = {op.name: op.op_type for op in plan.graph.ops()}
    events, uncalibrated = [], set()
    clocks, positions, last = [0.0] * nranks, [0] * nranks, [-1] * nranks
    busy = [0.0] * nranks
    in_flight = defaultdict(deque)          # (source, target, tag) -> (arrival, send event)
    link_free = defaultdict(float)

    def record(rank, start, end, kind, label, cause):
        events.append(Event(rank, start, end, kind, label, cause))
        last[rank] = len(events) - 1
        clocks[rank] = end

    unfinished = set(range(nranks))
    while unfinished:
        progressed = False
        for rank in sorted(unfinished):
            program = programs[rank]
            while positions[rank] < len(program):
                instruction = program[positions[rank]]
                kind = type(instruction)
                if kind is Exec:
                    op_type = op_types[instruction.op_name]
                    if op_type not in machine.op_types:
                        uncalibrated.add(op_type)
                    seconds = slowdown * machine.task_seconds(
                        op_type, task_work(instruction, plan.meta), threads)
                    busy[rank] += seconds
                    record(rank, clocks[rank], clocks[rank] + seconds, "exec", op_type,
                           last[rank])
                elif kind is Send:
                    link = (rank, instruction.peer)
                    start = max(clocks[rank], link_free[link])
                    link_free[link] = start + machine.message_seconds(instruction.nbytes)
                    previous = last[rank]
                    record(rank, clocks[rank], clocks[rank], "send", str(instruction), previous)
                    in_flight[(rank, instruction.peer, instruction.tag)].append(
                        (link_free[link], last[rank]))
                elif kind is Recv:
                    queue = in_flight[(instruction.peer, rank, instruction.tag)]
                    if not queue:
                        break
                    arrival, send_event = queue.popleft()
                    if arrival > clocks[rank]:
                        record(rank, clocks[rank], arrival, "wait", str(instruction), send_event)
                positions[rank] += 1
                progressed = True
            if positions[rank] == len(program):
                unfinished.discard(rank)
        if not progressed and unfinished:
            raise RuntimeError(f"replay stalled on ranks {sorted(unfinished)}: a RECV "
                               "without its SEND (a plan bug)")
    finish = [events[last[rank]].end if last[rank] >= 0 else 0.0 for rank in range(nranks)]
    return Prediction(nranks, max(finish, default=0.0), finish, busy,
                      [plan.peak_bytes(rank, phases) for rank in range(nranks)],
                      critical_path(events, finish, last), events, uncalibrated)


def critical_path(events, finish, last) -> list:
    """Event indices from the start to the end of the rank that finishes last."""
    if not events:
        return []
    rank = max(range(len(finish)), key=lambda r: finish[r])
    path, index = [], last[rank]
    while index >= 0:
        path.append(index)
        index = events[index].cause
    return path[::-1]
