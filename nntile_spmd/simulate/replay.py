"""Simulator: replay every rank's program through a discrete-event model.

Each rank runs its program in order, as the executor does: a task takes its
calibrated time, a SEND puts the message on the (sender, receiver) link as soon as
the rank reaches it and costs the sender its CPU time, a RECV waits until that
message has arrived and costs the receiver the copy; each rank has cores of its own,
unless machine.core_sharing says the node's ranks share them (Replay). Every event
remembers what it waited for, so the critical path can be walked back from the
rank that finishes last.
"""

from __future__ import annotations

from collections import Counter, defaultdict, deque
from dataclasses import dataclass, field

from ..plan.instructions import Exec, Recv, Send
from .machine import MachineModel, op_type_of
from .turns import CoreScheduler


@dataclass
class Event:
    rank: int
    start: float
    end: float
    kind: str            # "exec" | "send" (posted) | "send_cpu" | "wait" | "recv_cpu"
    label: str           # op type, or the instruction that moved a tile
    cause: int           # index of the event this one waited for (-1: none)


@dataclass
class Prediction:
    """What one execute of a plan is predicted to cost, per rank and overall."""

    nranks: int
    step_s: float                       # the last rank's finish time
    finish_s: list                      # per rank
    busy_s: list                        # per rank, time in tasks (not SEND/RECV)
    peak_bytes: list                    # per rank, from the plan's exact memory replay
    critical_path: list                 # event indices, first to last
    events: list = field(repr=False, default_factory=list)
    uncalibrated: set = field(default_factory=set)

    @property
    def idle_s(self) -> list:
        return [finish - busy for finish, busy in zip(self.finish_s, self.busy_s)]

    def critical_summary(self) -> dict:
        """Seconds of the critical path spent per kind ("exec:gemm", "wait", ...).

        A wait counts from the send it waited for, not from when the rank began to
        wait: the path reaches it through that send, so the parts add up to the step."""
        totals, reached = Counter(), 0.0
        for index in self.critical_path:
            event = self.events[index]
            name = f"exec:{event.label}" if event.kind == "exec" else event.kind
            totals[name] += max(0.0, event.end - max(event.start, reached))
            reached = max(reached, event.end)
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
    replay = Replay(plan, machine, phases, ranks_per_node)
    replay.run()
    finish = [replay.events[index].end if index >= 0 else 0.0 for index in replay.last]
    return Prediction(plan.nranks, max(finish, default=0.0), finish, replay.busy,
                      [plan.peak_bytes(rank, phases) for rank in range(plan.nranks)],
                      critical_path(replay.events, finish, replay.last), replay.events,
                      replay.uncalibrated)


class Replay:
    """The discrete-event state of one replay: a global clock, each rank's position
    and what it is doing, the messages in flight.

    How ranks use cores is machine.core_sharing. "own" (the default): every rank has
    `cores // ranks` of its node's cores, at least one of its own, and runs its tasks
    at the calibrated speed. Otherwise (a node with more ranks than cores) the ranks
    share them as the processor does: while the ranks of a group ask for more
    threads than it has cores, each running one runs that much slower. A rank in a
    task asks for its threads, in a SEND or a RECV for one, and a rank that waits
    (for a tile, for its sends to be received, or done with its program in the
    step's closing collective) for one while it polls: for machine.poll_s from the
    start of the wait, as the runtime spins before it sleeps.

    "node": unbound ranks, the group is the node. "bound": each rank has one thread
    and the group is its core, rank r on core r mod cores (`mpiexec -bind-to core`);
    the ranks of a core then share it as the scheduler runs them (turns.py: the
    least CPU time runs, a computing rank keeps its turn, a polling rank spins off
    its core-mate's lead) when the machine file has the scheduler's turn, else
    evenly as above. How unbound ranks share the cores is up to the scheduler: it
    moved a step by up to 80 % between rounds of one run (docs/simulation.md).
    """

    def __init__(self, plan, machine, phases, ranks_per_node):
        nranks = plan.nranks
        self.per_node = min(nranks, ranks_per_node or nranks)
        self.threads = machine.threads_per_rank(self.per_node)
        self.shared = machine.core_sharing != "own"
        # the cores each rank shares: its node's, or one core of it (see above)
        self.one_core_each = machine.core_sharing == "bound" and \
            self.per_node > machine.cores
        self.group_cores = 1 if self.one_core_each else machine.cores
        self.turns = CoreScheduler(machine.core_turn_s, machine.spin_share) \
            if self.one_core_each and machine.core_turn_s > 0 else None
        self.plan, self.machine = plan, machine
        self.programs = [plan.program(rank, phases) for rank in range(nranks)]
        self.op_types = {op.name: op.op_type for op in plan.graph.ops()}
        self.events, self.uncalibrated = [], set()
        self.now = 0.0
        self.positions, self.last = [0] * nranks, [-1] * nranks
        self.busy = [0.0] * nranks
        self.unfinished = set(range(nranks))
        self.finished = {}     # rank at the end of its program, all sends received -> since
        self.draining = {}     # rank at the end of its program -> since when
        self.unreceived = Counter()   # rank -> its messages not yet received
        # rank -> [seconds left at full speed, start, op type or instruction, kind]
        self.running = {}
        self.waiting = {}      # rank -> (time its wait began, the message queue it waits on)
        self.in_flight = defaultdict(deque)   # (source, target, tag) -> (arrival, send event)
        self.link_free = defaultdict(float)

    def record(self, rank, start, end, kind, label, cause):
        self.events.append(Event(rank, start, end, kind, label, cause))
        self.last[rank] = len(self.events) - 1

    def run(self):
        unfinished = self.unfinished
        while unfinished:
            for rank in sorted(unfinished):
                if rank not in self.running and rank not in self.draining:
                    self.advance(rank)
                    if self.positions[rank] == len(self.programs[rank]) \
                            and rank not in self.running:
                        self.reach_end(rank)
            if unfinished and not self.step_clock():
                raise RuntimeError(f"replay stalled on ranks {sorted(unfinished)}: a RECV "
                                   "without its SEND, or a SEND nobody receives (a plan "
                                   "bug)")

    def reach_end(self, rank):
        """The executor's end of a program: it completes every send, so the rank is
        done once its receivers have taken them all (it polls, yielding the core)."""
        if self.unreceived[rank]:
            self.draining[rank] = self.now
            return
        self.unfinished.discard(rank)
        self.finished[rank] = self.now

    def received_from(self, sender, receiver):
        self.unreceived[sender] -= 1
        if sender in self.draining and not self.unreceived[sender]:
            began = self.draining.pop(sender)
            self.record(sender, began, self.now, "wait", "its sends to be received",
                        self.last[receiver])
            self.reach_end(sender)

    def advance(self, rank):
        """Run `rank`'s instructions that take no time, up to a task or an unmet RECV."""
        program, machine = self.programs[rank], self.machine
        while self.positions[rank] < len(program):
            instruction = program[self.positions[rank]]
            kind = type(instruction)
            if kind is Exec:
                op_type = op_type_of(self.op_types, instruction.op_name)
                if not machine.calibrated(op_type):
                    self.uncalibrated.add(op_type)
                seconds = machine.exec_seconds(op_type, instruction, self.plan.meta,
                                               self.threads)
                self.running[rank] = [seconds, self.now, op_type, "exec"]
                self.positions[rank] += 1
                return
            if kind is Send:
                link = (rank, instruction.peer)
                same_node = rank // self.per_node == instruction.peer // self.per_node
                start = max(self.now, self.link_free[link])
                self.link_free[link] = start + machine.message_seconds(instruction.nbytes,
                                                                       same_node)
                self.record(rank, self.now, self.now, "send", str(instruction), self.last[rank])
                self.in_flight[(rank, instruction.peer, instruction.tag)].append(
                    (self.link_free[link], self.last[rank]))
                self.unreceived[rank] += 1
                self.positions[rank] += 1
                if self.start_mpi_call(rank, machine.send_seconds(instruction.nbytes),
                                       instruction, "send_cpu"):
                    return
                continue
            if kind is Recv:
                channel = (instruction.peer, rank, instruction.tag)
                queue = self.in_flight[channel]
                if not queue or queue[0][0] > self.now:
                    self.waiting.setdefault(rank, (self.now, channel))
                    return
                arrival, send_event = queue.popleft()
                began = self.waiting.pop(rank, (self.now, channel))[0]
                if arrival > began:
                    self.record(rank, began, arrival, "wait", str(instruction), send_event)
                self.received_from(instruction.peer, rank)
                self.positions[rank] += 1
                if self.start_mpi_call(rank, machine.recv_seconds(instruction.nbytes),
                                       instruction, "recv_cpu"):
                    return
                continue
            self.positions[rank] += 1

    def start_mpi_call(self, rank, seconds, instruction, kind) -> bool:
        """The CPU time of a SEND or RECV runs like a one-thread task (if any)."""
        if seconds <= 0:
            return False
        self.running[rank] = [seconds, self.now, str(instruction), kind]
        return True

    def group(self, rank):
        node, local = divmod(rank, self.per_node)
        return (node, local % self.machine.cores) if self.one_core_each else node

    def polling(self) -> dict:
        """Waiting ranks still polling (within poll_s of their wait's start) -> when
        they stop and sleep."""
        machine = self.machine
        since = {rank: began for rank, (began, _) in self.waiting.items()}
        since.update(self.draining)
        if machine.finished_ranks_poll:
            since.update(self.finished)
        return {rank: began + machine.poll_s for rank, began in since.items()
                if began + machine.poll_s > self.now}

    def speeds(self) -> dict:
        """Each running rank's speed: 1 on cores of its own; else its group's cores
        over the threads asked there, or, where ranks take turns on a core, 1 for the
        rank whose turn it is."""
        if not self.shared:
            return dict.fromkeys(self.running, 1.0)
        pollers = self.polling()
        if self.turns is not None:
            ready, spinning = defaultdict(list), defaultdict(list)
            for rank in sorted(self.running):
                ready[self.group(rank)].append(rank)
            for rank in sorted(pollers):
                spinning[self.group(rank)].append(rank)
            self.turns.update(self.now, ready, spinning)
            # a rank back on its core after another's work reloads its caches
            for rank in self.turns.switched_in:
                self.running[rank][0] += self.machine.switch_penalty_s
            self.turns.switched_in.clear()
            return {rank: float(self.turns.holds(self.group(rank), rank))
                    for rank in self.running}
        asked = Counter()
        for rank, (_, _, _, kind) in self.running.items():
            # BLAS and numba run a task on the rank's threads; MPI calls on one
            asked[self.group(rank)] += self.threads if kind == "exec" else 1
        for rank in pollers:
            asked[self.group(rank)] += 1
        cores = self.group_cores
        return {rank: min(1.0, cores / asked[self.group(rank)]) for rank in self.running}

    def step_clock(self) -> bool:
        """Move the clock to the next task end or message arrival; False: none left."""
        speeds = self.speeds()
        ends = {rank: self.now + left / speeds[rank] if speeds[rank] else float("inf")
                for rank, (left, _, _, _) in self.running.items()}
        arrivals = [self.in_flight[channel][0][0] for _, channel in self.waiting.values()
                    if self.in_flight[channel]]
        turns = self.turns.next_change() if self.turns is not None else []
        # a poller that stops polling frees its share of the cores
        stop_polling = [end for end in self.polling().values() if end != float("inf")] \
            if self.shared and self.running else []
        upcoming = [end for end in ends.values() if end != float("inf")] + arrivals + turns \
            + stop_polling
        if not upcoming:
            return False
        then = max(self.now, min(upcoming))
        for rank, (left, start, label, kind) in list(self.running.items()):
            # a task that ends with a turn ends then (not a rounding error later)
            if ends[rank] <= then or left - (then - self.now) * speeds[rank] < 1e-15:
                del self.running[rank]
                if kind == "exec":
                    self.busy[rank] += then - start
                self.record(rank, start, then, kind, label, self.last[rank])
            else:
                self.running[rank][0] = left - (then - self.now) * speeds[rank]
        self.now = then
        return True


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
