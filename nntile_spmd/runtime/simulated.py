"""Runtime layer: SimulatedWorld runs every rank's program inside one process,
with in-memory messages and the same semantics as MPI (tests, planning at scale).
"""

from __future__ import annotations

from collections import defaultdict, deque
from typing import NamedTuple

import numpy as np

from .device import select_device
from .thread_budget import TaskThreads, simulated_task_threads
from .stats import Traffic


class Envelope(NamedTuple):
    """A simulated message's address, its mailbox key and a receive's handle."""

    source: int
    target: int
    tag: int


class SimulatedTransport:
    """Messages of one simulated rank, matched by (source, target, tag) in order.

    Like MPI it moves the bytes of the buffers as they lie in memory (no re-layout:
    a sender whose buffer is C-ordered while the receiver's is Fortran-ordered gets
    a transposed tile here too, as on real ranks); a non-contiguous buffer raises, as
    mpi4py does; a message shorter than the posted buffer fills its start, a longer
    one is a truncation error; both sides count the bytes of the buffers they handed
    over and received.
    """

    def __init__(self, rank, mailbox):
        self.rank, self.mailbox = rank, mailbox
        self.traffic = Traffic()

    def post_send(self, peer, tag, array):
        message = storage_bytes(array).copy()
        self.traffic.sent_bytes += message.nbytes
        self.traffic.sent_messages += 1
        self.mailbox[Envelope(self.rank, peer, tag)].append(message)

    def wait_send(self, handle):
        pass

    def test_send(self, handle):
        return True             # the message was copied into the mailbox at post_send

    def post_recv(self, peer, tag, buffer):
        return Envelope(peer, self.rank, tag)

    def test_recv(self, handle):
        return bool(self.mailbox.get(handle))

    def wait_recv(self, handle, describe):
        if not self.test_recv(handle):
            raise RuntimeError(f"simulated deadlock: {describe()}")

    def finish_recv(self, handle, buffer):
        message = storage_bytes(self.mailbox[handle].popleft())
        target = storage_bytes(buffer)
        if message.nbytes > target.nbytes:
            raise RuntimeError(f"message truncated: {message.nbytes} bytes from rank "
                               f"{handle.source} (tag {handle.tag}) into a "
                               f"{target.nbytes}-byte buffer on rank {handle.target}")
        target[:message.nbytes] = message
        self.traffic.received_bytes += message.nbytes
        self.traffic.received_messages += 1
        return buffer


def storage_bytes(array):
    """The buffer of a contiguous array as flat bytes in its own memory order (a view),
    which is what MPI reads and writes; a non-contiguous array raises, as in mpi4py."""
    if not (array.flags.f_contiguous or array.flags.c_contiguous):
        raise ValueError(f"a {array.shape} {array.dtype} array that is not contiguous "
                         "cannot be a message buffer")
    order = "F" if array.flags.f_contiguous else "C"   # a view either way (CuPy too)
    return array.reshape(-1, order=order).view(np.uint8)


class SimulatedWorld:
    """n ranks in one process; pass as `comm=` to nt.compile."""

    runs_every_rank = True
    executes = True
    cuda_aware = False      # messages are copied between in-process buffers
    send_grace_s = None     # the executor's default (sends here complete when posted)

    def __init__(self, size: int):
        if size < 1:
            raise ValueError(f"a simulated world needs at least one rank, got {size}")
        self.size = size
        self.rank = 0                 # the rank whose view get_stats() reports by default
        self.mailbox = defaultdict(deque)
        self.where = "compile"

    def __repr__(self) -> str:
        return f"SimulatedWorld({self.size})"

    def local_ranks(self):
        return range(self.size)

    def setup_node(self, device, threads, task_threads, gpus=None):
        """One process holds every rank: the first GPU (of `gpus`), BLAS threads as they are."""
        return select_device(device, 0, gpus), \
            TaskThreads(simulated_task_threads(task_threads))

    def transport(self, rank, epoch=0):
        return SimulatedTransport(rank, self.mailbox)   # run() clears the mailbox: no epochs

    def run(self, executors: dict):
        """Round-robin over ranks until all finish; no progress in a round is a deadlock."""
        # a run that raised (a kernel error) may have left in-flight messages here,
        # which the next run's receives would consume
        self.mailbox.clear()
        unfinished = dict(executors)
        while unfinished:
            progressed = False
            for rank, executor in list(unfinished.items()):
                before = executor.pc
                if executor.run(blocking=False):
                    del unfinished[rank]
                    progressed = True
                progressed |= executor.pc != before
            if not progressed:
                waiting = "; ".join(executor.describe_wait(executor.program[executor.pc])
                                    for executor in unfinished.values())
                raise RuntimeError(f"simulated deadlock (a plan bug): {waiting}")
        leftover = {k: len(v) for k, v in self.mailbox.items() if v}
        assert not leftover, f"messages sent but never received: {leftover}"

    def fetch_tile(self, stores, key, owner, root, tile_shape_dtype):
        """The tile's array as seen by every rank (from its owner's store)."""
        source = 0 if owner < 0 else owner
        return stores[source][key]

    def agree(self, value, what=None):
        """Every rank holds the same value here by construction."""
        return [value] * self.size

    def check_fingerprint(self, values, what):
        """Every rank's fingerprint is this process's by construction."""
        return [values] * self.size
