"""Runtime layer: the loop that runs one rank's program. It dispatches each
instruction through a table and never decides to talk: every message is in the plan.

Hot-loop notes (benchmarks/bench_executor.py measures the cost per task):
the handlers are closures over the store's dict, the kernel table and the tile
metadata (no `self.` look-ups per instruction); receives are posted only at the
start and after each RECV, the only points where the plan's window moves
(`plan.memory.posts_before` with first_pending = RECVs done), so programs
without RECVs pay nothing for the window.
"""

from __future__ import annotations

import os
import time
from collections import deque

from ..plan.instructions import Exec, Free, Recv, Send, key_str
from ..plan.memory import recv_positions
from .offload_store import offload_handlers
from .stats import FLOPS, KERNEL_S, RECEIVED, SENT, TASKS, WAIT_S, new_totals


class RecvTimeout(RuntimeError):
    """A receive waited longer than the configured limit."""


class RankExecutor:
    """Runs `program` on `store`; with blocking=False (simulation) it returns when a
    receive has not arrived yet and resumes from there on the next call."""

    uses_spares = True              # freed large tiles serve later allocations (storage.py)

    def __init__(self, rank, program, meta, store, transport, kernels, window, events=None,
                 positions=None):
        self.rank, self.program, self.meta = rank, program, meta
        self.events = events        # list of (kind, op, kernel, start, end, thread) or None
        self.store, self.transport, self.kernels = store, transport, kernels
        self.window = window
        store.use_spares = self.uses_spares
        store.begin(program)
        self.positions = recv_positions(program) if positions is None else positions
        self.pc = 0
        self.posted = 0             # RECVs posted so far (in program order)
        self.received = 0           # RECVs completed so far
        self.pending_recvs = deque()  # (handle, buffer) of posted, unfinished RECVs
        self.pending_sends = {}     # key -> [handles]
        self.parked = []            # (handles, buffer, meta): old versions still being sent
        self.traffic = transport.traffic   # counted where buffers meet MPI
        self.per_op = {}            # op name -> totals list (stats.TASKS, ...)
        self.busy_s = 0.0           # executor clock: time inside run()
        self.dispatch = {Recv: self.make_recv(), Send: self.make_send(), Exec: self.make_exec(),
                         Free: self.make_free(), **offload_handlers(self)}

    def run(self, blocking=True) -> bool:
        """Advance; True once the whole program ran and all sends completed."""
        start = time.perf_counter()
        try:
            return self.advance(blocking)
        finally:
            self.busy_s += time.perf_counter() - start

    def advance(self, blocking):
        program, dispatch = self.program, self.dispatch
        if self.posted < len(self.positions):
            self.post_receives()
        for pc in range(self.pc, len(program)):
            instruction = program[pc]
            if dispatch[type(instruction)](instruction, blocking) is False:
                self.pc = pc
                return False
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
        for handles, buffer, meta in self.parked:
            for handle in handles:
                self.transport.wait_send(handle)
            self.store.release(buffer, meta)
        self.parked.clear()
        self.store.end(self.program)   # spare buffers may serve the next execute of it

    def abandon(self):
        """The execute failed (here or on another simulated rank): stop. Nothing runs
        off this thread in the serial executor."""

    def post_receives(self):
        """Post RECVs up to `window` ahead of the first unfinished one (plan.memory rule)."""
        target = min(len(self.positions), self.received + self.window)
        if target <= self.posted:
            return
        program, meta, store, transport = self.program, self.meta, self.store, self.transport
        for position in self.positions[self.posted:target]:
            instruction = program[position]
            buffer = store.new_buffer(meta[instruction.key])
            handle = transport.post_recv(instruction.peer, instruction.tag, buffer)
            self.pending_recvs.append((handle, buffer))
        self.posted = target

    @property
    def flops(self) -> int:
        """FLOPs of the tasks run so far (summed per op as they ran)."""
        return sum(totals[FLOPS] for totals in self.per_op.values())

    def totals(self, op_name):
        """The accumulator of `op_name` (created on its first instruction)."""
        totals = self.per_op.get(op_name)
        if totals is None:
            totals = self.per_op[op_name] = new_totals()
        return totals

    # -- handlers: return False only to suspend (non-blocking receive not arrived) --------
    def make_recv(self):
        transport, meta, install = self.transport, self.meta, self.store.install
        test_recv, wait_recv, finish_recv = (transport.test_recv, transport.wait_recv,
                                             transport.finish_recv)
        pending_recvs, pending_sends = self.pending_recvs, self.pending_sends
        retire, total = self.retire_sends, len(self.positions)
        traffic, totals, clock = self.traffic, self.totals, time.perf_counter

        def do_recv(instruction, blocking):
            handle, buffer = pending_recvs[0]
            op_totals = totals(instruction[4])   # the consumer op
            if not test_recv(handle):
                if not blocking:
                    return False
                start = clock()
                wait_recv(handle, lambda: self.describe_wait(instruction))
                end = clock()
                op_totals[WAIT_S] += end - start
                if self.events is not None:
                    self.events.append(("wait", instruction[4], "recv", start, end, 0))
            before = traffic.received_bytes
            buffer = finish_recv(handle, buffer)
            op_totals[RECEIVED] += traffic.received_bytes - before
            pending_recvs.popleft()
            self.received += 1
            key = instruction[0]
            if pending_sends and key in pending_sends:
                retire(key)
            install(key, buffer, meta[key])
            if self.posted < total:
                self.post_receives()    # the window moves only here
            if self.parked:
                self.release_parked()
        return do_recv

    def make_send(self):
        tiles, pending_sends = self.store.tiles, self.pending_sends
        post_send, traffic, totals = self.transport.post_send, self.traffic, self.totals

        def do_send(instruction, blocking):
            key, peer, tag, _, consumer = instruction
            before = traffic.sent_bytes
            handle = post_send(peer, tag, tiles[key])
            totals(consumer)[SENT] += traffic.sent_bytes - before
            handles = pending_sends.get(key)
            if handles is None:
                pending_sends[key] = [handle]
            else:
                handles.append(handle)
        return do_send

    def make_exec(self):
        tiles, kernels, meta = self.store.tiles, self.kernels, self.meta
        new_buffer, get_tile = self.store.new_buffer, self.store.tiles.__getitem__
        pending_sends, retire = self.pending_sends, self.retire_sends
        per_op, totals_of, clock, events = self.per_op, self.totals, time.perf_counter, self.events

        def do_exec(instruction, blocking):
            kernel, keys, _, writes, params, flops, op_name = instruction
            for key in writes:
                if pending_sends and key in pending_sends:
                    old = tiles[key]    # an in-flight send still reads the old version
                    if not retire(key):
                        tiles[key] = new_buffer(meta[key])
                        tiles[key][...] = old   # the op may accumulate
                if key not in tiles:
                    tiles[key] = new_buffer(meta[key])
            start = clock()
            try:
                kernels[kernel](*map(get_tile, keys), **params)
            except Exception as error:
                # a note keeps the kernel's own exception type (callers catch it)
                if hasattr(error, "add_note"):   # Python >= 3.11
                    error.add_note(self.describe_exec(instruction))
                raise
            end = clock()
            if events is not None:
                events.append(("task", op_name, kernel, start, end, 0))
            totals = per_op.get(op_name) or totals_of(op_name)
            totals[KERNEL_S] += end - start
            totals[TASKS] += 1
            totals[FLOPS] += flops
        return do_exec

    def make_free(self):
        release, pop, meta = self.store.release, self.store.tiles.pop, self.meta
        pending_sends, retire = self.pending_sends, self.retire_sends

        def do_free(instruction, blocking):
            key = instruction[0]
            if pending_sends and key in pending_sends and not retire(key):
                return              # parked: released once its sends complete
            release(pop(key), meta[key])
        return do_free

    def retire_sends(self, key) -> bool:
        """Complete the sends of `key`'s current version, polling for a grace period.

        True: done, the buffer may be reused. False: a receiver has not posted its
        receive yet (a rendezvous-sized message). Waiting longer could deadlock: that
        receiver may itself be waiting for this rank to post a receive beyond its
        window. So the buffer is parked instead: it leaves the tile table, stays
        counted as held, and is released when its sends complete.
        """
        handles, test = self.pending_sends.pop(key), self.transport.test_send
        deadline = None
        while True:
            handles = [handle for handle in handles if not test(handle)]
            if not handles:
                return True
            now = time.perf_counter()
            if deadline is None:
                deadline = now + SEND_GRACE_SECONDS
            elif now > deadline:
                self.parked.append((handles, self.store.tiles.pop(key), self.meta[key]))
                return False
            os.sched_yield()

    def release_parked(self):
        """Release the parked buffers whose sends have completed."""
        test, still = self.transport.test_send, []
        for handles, buffer, meta in self.parked:
            handles = [handle for handle in handles if not test(handle)]
            if handles:
                still.append((handles, buffer, meta))
            else:
                self.store.release(buffer, meta)
        self.parked[:] = still

    def describe_exec(self, instruction) -> str:
        kernel, keys, _, writes, _, _, op_name = instruction
        inputs = [key_str(key) for key in keys[:len(keys) - len(writes)]]
        return (f"in op {op_name} (kernel {kernel}) computing tile "
                f"{', '.join(key_str(key) for key in writes)} from "
                f"{', '.join(inputs) or 'no inputs'} on rank {self.rank}")

    def describe_wait(self, instruction) -> str:
        pc = self.positions[self.received] if self.received < len(self.positions) else self.pc
        return (f"rank {self.rank} waits for tile {key_str(instruction.key)} from rank "
                f"{instruction.peer} (tag {instruction.tag}) needed by op "
                f"{instruction.consumer}, instruction {pc} of {len(self.program)}")


# Polling budget before a waiting receive starts to sleep. MPI moves a message only
# inside calls such as Test (the receiver copies it, e.g. by CMA), and one
# time.sleep costs at least ~50 us of timer slack, which halved the throughput of
# 64 KiB tiles (benchmarks/bench_exchange.py); sched_yield keeps the spin polite
# to ranks that share the core.
SPIN_SECONDS = 0.02
# How long an old tile version waits for its sends before it is parked (see
# retire_sends): a receiver about to post its receive completes the send in that time
# and memory stays where the plan puts it; a longer wait only stalls. Measured with
# benchmarks/bench_simulator.py (small GPT-2, FSDP): 50 ms made a step 180 ms on 3
# ranks and 330 ms on 4 (the replay predicts ~20 ms); 1 ms, 40 and 34 ms.
SEND_GRACE_SECONDS = 0.001


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
