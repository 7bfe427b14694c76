"""Runtime layer: the loop that runs one rank's program. It dispatches each
instruction through a table and never decides to talk: every message is in the plan.
"""

from __future__ import annotations

import time

from ..plan.instructions import Exec, Free, Recv, Send, key_str
from ..plan.memory import posts_before, recv_positions


class RecvTimeout(RuntimeError):
    """A receive waited longer than the configured limit."""


class RankExecutor:
    """Runs `program` on `store`; with blocking=False (simulation) it returns when a
    receive has not arrived yet and resumes from there on the next call."""

    def __init__(self, rank, program, meta, store, transport, kernels, window):
        self.rank, self.program, self.meta = rank, program, meta
        self.store, self.transport, self.kernels = store, transport, kernels
        self.window = window
        self.positions = recv_positions(program)
        self.pc = self.posted = 0
        self.pending_recvs = {}     # program position -> (handle, buffer)
        self.pending_sends = {}     # key -> [handles]
        self.bytes_sent = self.flops = 0
        self.dispatch = {Recv: self.do_recv, Send: self.do_send, Exec: self.do_exec,
                         Free: self.do_free}

    def run(self, blocking=True) -> bool:
        """Advance; True once the whole program ran and all sends completed."""
        program, dispatch = self.program, self.dispatch
        while self.pc < len(program):
            self.post_receives()
            instruction = program[self.pc]
            if dispatch[type(instruction)](instruction, blocking) is False:
                return False
            self.pc += 1
        for handles in self.pending_sends.values():
            for handle in handles:
                self.transport.wait_send(handle)
        self.pending_sends.clear()
        return True

    def post_receives(self):
        target = posts_before(self.positions, self.pc, self.posted, self.window)
        for position in self.positions[self.posted:target]:
            instruction = self.program[position]
            buffer = self.store.new_buffer(self.meta[instruction.key])
            handle = self.transport.post_recv(instruction.peer, instruction.tag, buffer)
            self.pending_recvs[position] = (handle, buffer)
        self.posted = target

    def do_recv(self, instruction, blocking):
        handle, buffer = self.pending_recvs[self.pc]
        if not blocking and not self.transport.test_recv(handle):
            return False
        if blocking:
            self.transport.wait_recv(handle, lambda: self.describe_wait(instruction))
        buffer = self.transport.finish_recv(handle, buffer)
        del self.pending_recvs[self.pc]
        self.wait_sends(instruction.key)
        self.store.install(instruction.key, buffer, self.meta[instruction.key])

    def do_send(self, instruction, blocking):
        handle = self.transport.post_send(instruction.peer, instruction.tag,
                                          self.store[instruction.key])
        self.pending_sends.setdefault(instruction.key, []).append(handle)
        self.bytes_sent += instruction.nbytes

    def do_exec(self, instruction, blocking):
        store = self.store
        for key in instruction.writes:
            if key in self.pending_sends:
                self.wait_sends(key)     # an in-flight send still reads the old version
            if key not in store:
                store.allocate(key, self.meta[key])
        arrays = [store[key] for key in instruction.keys]
        self.kernels[instruction.kernel](*arrays, **instruction.params)
        self.flops += instruction.flops

    def do_free(self, instruction, blocking):
        self.wait_sends(instruction.key)
        self.store.free(instruction.key, self.meta[instruction.key])

    def wait_sends(self, key):
        for handle in self.pending_sends.pop(key, ()):
            self.transport.wait_send(handle)

    def describe_wait(self, instruction) -> str:
        return (f"rank {self.rank} waits for tile {key_str(instruction.key)} from rank "
                f"{instruction.peer} (tag {instruction.tag}) needed by op "
                f"{instruction.consumer}, instruction {self.pc} of {len(self.program)}")


def wait_with_deadline(test, timeout, describe):
    """Poll `test` until it is true; past `timeout` seconds raise RecvTimeout."""
    start = time.perf_counter()
    pause = 0.0
    while not test():
        if time.perf_counter() - start > timeout:
            raise RecvTimeout(f"receive timed out after {timeout:.0f} s: {describe()}")
        time.sleep(pause)
        pause = min(pause * 2 + 1e-6, 1e-3)   # spin first: most tiles arrive in microseconds
