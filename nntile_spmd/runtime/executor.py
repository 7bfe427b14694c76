"""Runtime layer: the loop that runs one rank's program. It dispatches each
instruction through a table and never decides to talk: every message is in the plan.

Hot-loop notes (benchmarks/bench_executor.py measures the cost per task):
tiles live in a list indexed by the slots of program_index.py (no tuple hashing),
freed buffers go to per-(shape, dtype) spare lists that later allocations take from
(storage.py keeps the peak where the plan puts it), per-op statistics are lists
indexed by op id; the handlers are closures over all of these (no `self.` look-ups
per instruction). Receives are posted only at the start and after each RECV, the
only points where the plan's window moves (`plan.memory.posts_before` with
first_pending = RECVs done), so programs without RECVs pay nothing for the window.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections import deque

from ..plan.instructions import Exec, Free, Recv, Send, key_str
from .offload_store import offload_handlers
from .stats import FLOPS, KERNEL_S, RECEIVED, SENT, TASKS, WAIT_S, Event, new_totals


class RecvTimeout(RuntimeError):
    """A receive waited longer than the configured limit."""


@dataclasses.dataclass(frozen=True)
class ExecutorOptions:
    """How a rank's executor runs its program, beyond the program and its tiles."""

    window: int                      # RECVs posted ahead (the plan's)
    task_threads: int = 1            # tile tasks side by side (> 1: executor_threads.py)
    send_grace_s: float | None = None   # see retire_sends; None: SEND_GRACE_SECONDS
    profiling: bool = False          # record an Event per task and per wait


class RankExecutor:
    """Runs `program` on `store`; with blocking=False (simulation) it returns when a
    receive has not arrived yet and resumes from there on the next call.
    `index` is the program's ProgramIndex (kernels, RECV positions, tile slots)."""

    uses_spares = True              # freed tiles serve later allocations (storage.py)

    def __init__(self, rank, program, store, transport, index, options: ExecutorOptions):
        self.rank, self.program, self.index = rank, program, index
        # how long a tile version's unfinished sends are polled before it is parked
        self.send_grace_s = SEND_GRACE_SECONDS if options.send_grace_s is None else \
            options.send_grace_s
        self.events = [] if options.profiling else None   # stats.Event list when profiling
        self.store, self.transport, self.kernels = store, transport, index.kernels
        # CUDA-aware transports fence device buffers by the events recorded after each
        # kernel (kernel_fences.py); None elsewhere, and the EXEC handler skips it
        self.fence = getattr(transport, "fence", None)
        self.window = options.window
        store.use_spares = self.uses_spares
        store.begin(program)
        self.slot_spares = store.slot_spares(index)          # slot -> its spare list
        self.slots = [None] * len(index.keys)               # slot -> tile array
        tiles, keys = store.tiles, index.keys
        # After another program (other phases) the dict may hold a tile this one creates
        # and frees; then every slot goes through the dict, so that the tile is used and
        # freed, not left behind. A program run again finds only its resident tiles.
        self.resident = index.resident if store.last_program is program else \
            range(len(keys))
        for slot in self.resident:
            self.slots[slot] = tiles.get(keys[slot])
        self.stored_back = False
        self.positions = index.positions
        self.pc = 0
        self.posted = 0             # RECVs posted so far (in program order)
        self.received = 0           # RECVs completed so far
        self.pending_recvs = deque()  # (handle, buffer) of posted, unfinished RECVs
        self.pending_sends = {}     # slot -> [handles]
        self.parked = []            # (handles, buffer, slot): old versions still being sent
        self.traffic = transport.traffic   # counted where buffers meet MPI
        self.op_totals = [new_totals() for _ in index.op_names]   # op id -> stats.TASKS, ...
        self.busy_s = 0.0           # executor clock: time inside run()
        self.busy_cpu_s = 0.0       # this thread's CPU time inside run() (less where it
        #                             slept, or shared its core with another process)
        self.dispatch = {Recv: self.make_recv(), Send: self.make_send(), Exec: self.make_exec(),
                         Free: self.make_free(), **offload_handlers(self)}

    def run(self, blocking=True) -> bool:
        """Advance; True once the whole program ran and all sends completed."""
        start, cpu = time.perf_counter(), time.thread_time()
        try:
            return self.advance(blocking)
        finally:
            self.busy_s += time.perf_counter() - start
            self.busy_cpu_s += time.thread_time() - cpu

    def advance(self, blocking):
        program, operands, dispatch = self.program, self.index.operands, self.dispatch
        if self.posted < len(self.positions):
            self.post_receives()
        pc = self.pc
        try:    # free unless raised: the failed instruction is kept for the flight record
            for pc in range(self.pc, len(program)):
                instruction = program[pc]
                if dispatch[type(instruction)](instruction, operands[pc], blocking) is False:
                    self.pc = pc
                    return False
        except BaseException:
            self.pc = pc
            raise
        self.pc = len(program)
        self.finish()
        return True

    def finish(self):
        """The program ran: complete every send, release parked buffers."""
        # Every receive of this rank is done, so no peer waits on it any more: the
        # peers post the receives these sends need as they go, and waiting is safe.
        for handles in self.pending_sends.values():
            for handle in handles:
                self.transport.wait_send(handle)
        self.pending_sends.clear()
        for handles, buffer, slot in self.parked:
            for handle in handles:
                self.transport.wait_send(handle)
            self.store.unpark(buffer, self.slot_spares[slot])
        self.parked.clear()
        self.store_back()
        self.store.end(self.program)   # spare buffers may serve the next execute of it

    def store_back(self):
        """Put the resident slots back in the tile store's dict (a freed one leaves it)."""
        if self.stored_back:
            return
        self.stored_back = True
        tiles, keys, slots = self.store.tiles, self.index.keys, self.slots
        for slot in self.resident:
            array = slots[slot]
            if array is None:
                tiles.pop(keys[slot], None)
            else:
                tiles[keys[slot]] = array

    def abandon(self):
        """The execute failed (here or on another simulated rank): stop, and leave the
        tiles in the store for its cleanup. Nothing runs off this thread here."""
        self.store_back()

    def in_flight_sends(self) -> list:
        """(handle, buffer) of every send not known to be complete."""
        sends = [(handle, self.slots[slot]) for slot, handles in self.pending_sends.items()
                 for handle in handles]
        return sends + [(handle, buffer) for handles, buffer, _ in self.parked
                        for handle in handles]

    def post_receives(self):
        """Post RECVs up to `window` ahead of the first unfinished one (plan.memory rule)."""
        target = min(len(self.positions), self.received + self.window)
        if target <= self.posted:
            return
        program, operands, transport = self.program, self.index.operands, self.transport
        take, metas, spares = self.store.take, self.index.metas, self.slot_spares
        for position in self.positions[self.posted:target]:
            instruction, (slot, _) = program[position], operands[position]
            buffer = take(metas[slot], spares[slot])
            handle = transport.post_recv(instruction.peer, instruction.tag, buffer)
            self.pending_recvs.append((handle, buffer))
        self.posted = target

    @property
    def flops(self) -> int:
        """FLOPs of the tasks run so far (summed per op as they ran)."""
        return sum(totals[FLOPS] for totals in self.op_totals)

    @property
    def per_op(self) -> dict:
        """op name -> totals list (stats.TASKS, ...) of the ops this program names."""
        return dict(zip(self.index.op_names, self.op_totals))

    # -- handlers: return False only to suspend (non-blocking receive not arrived) --------
    def make_recv(self):
        transport, slots, op_totals = self.transport, self.slots, self.op_totals
        give, slot_spares = self.store.give, self.slot_spares
        test_recv, wait_recv, finish_recv = (transport.test_recv, transport.wait_recv,
                                             transport.finish_recv)
        pending_recvs, pending_sends = self.pending_recvs, self.pending_sends
        retire, total = self.retire_sends, len(self.positions)
        traffic, clock, thread_clock = self.traffic, time.perf_counter, time.thread_time

        def do_recv(instruction, operands, blocking):
            handle, buffer = pending_recvs[0]
            slot, op = operands
            totals = op_totals[op]      # the consumer op's
            if not test_recv(handle):
                if not blocking:
                    return False
                start, cpu = clock(), thread_clock()
                wait_recv(handle, lambda: self.describe_wait(instruction))
                cpu = thread_clock() - cpu      # inside the wall interval, as do_exec's
                end = clock()
                totals[WAIT_S] += end - start
                if self.events is not None:
                    self.events.append(Event("wait", instruction.consumer, "recv", start, end,
                                             0, cpu))
            before = traffic.received_bytes
            buffer = finish_recv(handle, buffer)
            totals[RECEIVED] += traffic.received_bytes - before
            pending_recvs.popleft()
            self.received += 1
            if pending_sends and slot in pending_sends:
                retire(slot)
            old = slots[slot]
            slots[slot] = buffer        # the received version replaces the old copy
            if old is not None:
                give(old, slot_spares[slot])
            if self.posted < total:
                self.post_receives()    # the window moves only here
            if self.parked:
                self.release_parked()
        return do_recv

    def make_send(self):
        slots, pending_sends, op_totals = self.slots, self.pending_sends, self.op_totals
        post_send, traffic = self.transport.post_send, self.traffic

        def do_send(instruction, operands, blocking):
            slot, op = operands
            before = traffic.sent_bytes
            handle = post_send(instruction.peer, instruction.tag, slots[slot])
            op_totals[op][SENT] += traffic.sent_bytes - before
            handles = pending_sends.get(slot)
            if handles is None:
                pending_sends[slot] = [handle]
            else:
                handles.append(handle)
        return do_send

    def make_keep_for_sends(self, before_retire=None):
        """The function called before a kernel writes `slot` while sends of the tile's
        current version are in flight: it completes them (retire_sends), or, where a
        receiver has not posted yet and the buffer is parked, gives the slot a copy of
        it, since the op may accumulate into it. `before_retire(slot)` runs first where
        other users of the slot must be done (the threaded executor's tasks)."""
        slots, take, metas, spares = (self.slots, self.store.take, self.index.metas,
                                      self.slot_spares)
        retire = self.retire_sends

        def keep_for_sends(slot):
            if before_retire is not None:
                before_retire(slot)
            old = slots[slot]           # an in-flight send still reads the old version
            if not retire(slot):
                slots[slot] = take(metas[slot], spares[slot])
                slots[slot][...] = old   # the op may accumulate
        return keep_for_sends

    def make_prepare_writes(self, before_retire=None):
        """The function that readies the slots an EXEC writes: a tile whose sends are in
        flight is kept for them (make_keep_for_sends), a slot with no tile gets a buffer.
        The serial EXEC handler runs the same loop inline: one more call per task
        measured above noise in the per-task cost (docs/benchmarks.md)."""
        slots, take, metas, spares = (self.slots, self.store.take, self.index.metas,
                                      self.slot_spares)
        pending_sends, keep_for_sends = self.pending_sends, self.make_keep_for_sends(
            before_retire)

        def prepare_writes(write_slots):
            for slot in write_slots:
                if pending_sends and slot in pending_sends:
                    keep_for_sends(slot)
                if slots[slot] is None:
                    slots[slot] = take(metas[slot], spares[slot])
        return prepare_writes

    def make_exec(self):
        slots, take, metas, spares = (self.slots, self.store.take, self.index.metas,
                                      self.slot_spares)
        pending_sends, keep_for_sends = self.pending_sends, self.make_keep_for_sends()
        op_totals, clock, events, get_tile = (self.op_totals, time.perf_counter, self.events,
                                              slots.__getitem__)
        thread_clock, fence = time.thread_time, self.fence

        def do_exec(instruction, operands, blocking):
            kernel, tile_slots, _, write_slots, op = operands
            for slot in write_slots:    # make_prepare_writes' loop, inline (see there)
                if pending_sends and slot in pending_sends:
                    keep_for_sends(slot)
                if slots[slot] is None:
                    slots[slot] = take(metas[slot], spares[slot])
            # the thread's CPU interval read inside the wall one, so it never exceeds it
            start = clock()
            if events is not None:
                cpu = thread_clock()
            try:
                kernel(*map(get_tile, tile_slots), **instruction.params)
            except Exception as error:
                self.note_failure(error, instruction)
                raise
            if events is not None:
                cpu = thread_clock() - cpu
            end = clock()
            if fence is not None:
                fence.after_kernel(list(map(get_tile, tile_slots)),
                                   list(map(get_tile, write_slots)))
            if events is not None:
                events.append(Event("task", instruction.op_name, instruction.kernel, start,
                                    end, 0, cpu))
            totals = op_totals[op]
            totals[KERNEL_S] += end - start
            totals[TASKS] += 1
            totals[FLOPS] += instruction.flops
        return do_exec

    def make_free(self):
        slots, give, spares = self.slots, self.store.give, self.slot_spares
        pending_sends, retire = self.pending_sends, self.retire_sends

        def do_free(instruction, slot, blocking):
            if pending_sends and slot in pending_sends and not retire(slot):
                return              # parked: released once its sends complete
            give(slots[slot], spares[slot])
            slots[slot] = None
        return do_free

    def retire_sends(self, slot) -> bool:
        """Complete the sends of the current version of the tile in `slot`, polling for a
        grace period.

        True: done, the buffer may be reused. False: a receiver has not posted its
        receive yet (a rendezvous-sized message). Waiting longer could deadlock: that
        receiver may itself be waiting for this rank to post a receive beyond its
        window. So the buffer is parked instead: it leaves the tile table, stays
        counted as held, and is released when its sends complete.
        """
        handles, test = self.pending_sends.pop(slot), self.transport.test_send
        deadline = None
        while True:
            handles = [handle for handle in handles if not test(handle)]
            if not handles:
                return True
            now = time.perf_counter()
            if deadline is None:
                deadline = now + self.send_grace_s
            if now >= deadline:
                self.parked.append((handles, self.slots[slot], slot))
                self.store.park(self.slots[slot])
                self.slots[slot] = None
                return False
            os.sched_yield()

    def release_parked(self):
        """Release the parked buffers whose sends have completed."""
        test, still = self.transport.test_send, []
        for handles, buffer, slot in self.parked:
            handles = [handle for handle in handles if not test(handle)]
            if handles:
                still.append((handles, buffer, slot))
            else:
                self.store.unpark(buffer, self.slot_spares[slot])
        self.parked[:] = still

    def note_failure(self, error, instruction):
        """Name the task in a kernel's exception; a note keeps its own type (callers
        catch it)."""
        if hasattr(error, "add_note"):   # Python >= 3.11
            error.add_note(self.describe_exec(instruction))

    def describe_exec(self, instruction) -> str:
        keys, writes = instruction.keys, instruction.writes
        inputs = [key_str(key) for key in keys[:len(keys) - len(writes)]]
        return (f"in op {instruction.op_name} (kernel {instruction.kernel}) computing tile "
                f"{', '.join(key_str(key) for key in writes)} from "
                f"{', '.join(inputs) or 'no inputs'} on rank {self.rank}")

    def describe_wait(self, instruction) -> str:
        pc = self.positions[self.received] if self.received < len(self.positions) else self.pc
        return (f"rank {self.rank} waits for tile {key_str(instruction.key)} from rank "
                f"{instruction.peer} (tag {instruction.tag}) needed by op "
                f"{instruction.consumer}, instruction {pc} of {len(self.program)}")


# Polling budget before a waiting receive starts to sleep. MPI moves a message only
# inside calls such as Test (the receiver copies it, e.g. by CMA), and one
# time.sleep costs the timer's slack, which is long next to a small tile's copy
# (docs/benchmarks.md, "Measurements behind code constants"). sched_yield hands the
# core only to a process of the same session: ranks started by mpiexec have one each, and with
# Linux's autogroups a spinning rank keeps its fair share of a core it shares
# (benchmarks/bench_shared_core.py, docs/benchmarks.md#the-simulator).
SPIN_SECONDS = 0.02
# How long an old tile version waits for its sends before it is parked (see
# retire_sends): a receiver about to post its receive completes the send in that time
# and memory stays where the plan puts it; a longer wait only stalls a step
# (docs/benchmarks.md, "Measurements behind code constants").
SEND_GRACE_SECONDS = 0.001
# ...unless the node's ranks outnumber its cores (MPIWorld.setup_node): then the
# receiver often waits for its turn on a core, and the polling sender only takes
# CPU from the rank it shares its own core with, so the tile is parked at once: steps
# are faster and the held peak grows by a few tiles at most, while the in-order peak
# stays the plan's (docs/benchmarks.md, "Measurements behind code constants").
CROWDED_SEND_GRACE_SECONDS = 0.0


def wait_with_deadline(test, timeout, describe):
    """Poll `test` until it is true; past `timeout` seconds raise RecvTimeout."""
    if test():
        return
    clock, spin_yield = time.perf_counter, os.sched_yield
    start = clock()
    spin_until = start + SPIN_SECONDS
    pause = 0.0
    while not test():
        now = clock()
        if now < spin_until:
            spin_yield()
            continue
        if now - start > timeout:
            raise RecvTimeout(f"receive timed out after {timeout:g} s: {describe()}")
        time.sleep(pause)
        pause = min(pause * 2 + 1e-6, 1e-3)   # then back off: a long wait is a slow peer
