"""Runtime layer: MPIWorld, one real rank of an MPI job, and its transport.

Library traffic runs on a duplicated communicator so user messages never match
ours. Tiles travel as raw bytes of their Fortran-ordered storage (both sides
hold the same shape and order), never pickled. Every wait, collectives included,
is a nonblocking call polled against the deadline (runtime.timeouts), so a
stopped rank ends the job with an error naming it instead of a hang.
"""

from __future__ import annotations

import os
import pickle

import numpy as np
from mpi4py import MPI

from . import abnormal_end, end_guard, failure, flight
from .device import select_device
from .executor import CROWDED_SEND_GRACE_SECONDS, RecvTimeout, wait_with_deadline
from .stats import Traffic
from .thread_budget import TaskThreads
from .timeouts import resolve_timeout
from .unresponsive import ABANDONED, FINAL, RankUnresponsive, unresponsive_error

# Tags of one execute are the plan's tags (< TAG_LIMIT) plus the execute's epoch
# times TAG_LIMIT, so a message left over from an execute (a rank that skipped one,
# or a receive cancelled after a timeout) can never match another execute's receive.
TAG_LIMIT = 32000


def byte_view(array):
    """The tile's storage as a flat uint8 view (F-contiguous -> no copy)."""
    return array.reshape(-1, order="F").view(np.uint8)


def tile_message(array):
    """[buffer, MPI.BYTE] spanning the tile's storage.

    A NumPy tile of ndim >= 1 is passed as it is: mpi4py takes the storage of
    any contiguous (C or Fortran) array as bytes and raises on a non-contiguous
    one; this saves a byte_view per message. 0-d arrays would be
    sent as 0 bytes that way, and other array types keep the explicit view.
    """
    if array.ndim and type(array) is np.ndarray:
        return [array, MPI.BYTE]
    return [byte_view(array), MPI.BYTE]


class MPITransport:
    """Isend/Irecv of tile storage; counts the bytes of every buffer handed to MPI
    and, on the receive side, the bytes MPI says arrived (the Status count)."""

    test_send = staticmethod(MPI.Request.Test)   # mpi4py's own: no Python frame

    def __init__(self, comm, timeout, tag_offset=0):
        self.comm, self.timeout, self.tag_offset = comm, timeout, tag_offset
        self.traffic = Traffic()
        self.status = MPI.Status()   # of the receive that completed last
        self.posted = []             # receive requests, to cancel after a failure

    def post_send(self, peer, tag, array):
        message = tile_message(array)
        traffic = self.traffic
        traffic.sent_bytes += message[0].nbytes
        traffic.sent_messages += 1
        return self.comm.Isend(message, dest=peer, tag=tag + self.tag_offset)

    def wait_send(self, request):
        # a large send completes only when the peer receives it: a stopped peer
        # would block MPI_Wait forever
        if not request.Test():
            wait_with_deadline(request.Test, self.timeout,
                               lambda: "a send to complete (the peer does not receive)")

    def post_recv(self, peer, tag, buffer):
        request = self.comm.Irecv(tile_message(buffer), source=peer, tag=tag + self.tag_offset)
        self.posted.append(request)
        return request

    def cancel_receives(self):
        """Cancel the receives still posted (after a failure), so no late message lands."""
        for request in self.posted:
            if request != MPI.REQUEST_NULL:
                request.Cancel()
                request.Wait()      # a cancelled receive completes at once
        self.posted.clear()

    def test_recv(self, request):
        return request.Test(self.status)

    def wait_recv(self, request, describe):
        wait_with_deadline(lambda: request.Test(self.status), self.timeout, describe)

    def finish_recv(self, request, buffer):
        # receives complete in program order and each is finished right after the
        # Test that completed it, so self.status is this message's
        traffic = self.traffic
        traffic.received_bytes += self.status.Get_count(MPI.BYTE)
        traffic.received_messages += 1
        return buffer


class MPIWorld:
    """This process's rank of `comm` (default MPI.COMM_WORLD)."""

    runs_every_rank = False
    executes = True
    send_grace_s = None     # the executor's default, until setup_node sees the node

    def __init__(self, comm=None, recv_timeout=None):
        if comm is not None and not isinstance(comm, MPI.Comm):   # an AttributeError before
            raise TypeError(f"comm must be an MPI communicator (MPI.COMM_WORLD or one split "
                            "from it), a SimulatedWorld or PlanningWorld, or None for "
                            f"MPI.COMM_WORLD; got {comm!r}")
        base = MPI.COMM_WORLD if comm is None else comm
        self.recv_timeout = resolve_timeout(recv_timeout)
        self.size, self.rank = base.Get_size(), base.Get_rank()
        self.on_world = base == MPI.COMM_WORLD   # our ranks are COMM_WORLD's
        self.where = "compile"       # what this rank is doing, for timeout messages
        flight.remember_world(self)
        self.comm = self.duplicate(base)
        self.control = self.duplicate(base)   # execute fingerprints and failure diagnosis
        self.epochs = max(1, (self.comm.Get_attr(MPI.TAG_UB) + 1) // TAG_LIMIT)
        self.cuda_aware = os.environ.get("NNTILE_SPMD_CUDA_AWARE") == "1"
        if not failure.PEERS and self.size > 1 and self.on_world:
            # once per process: lets an abort name a rank that died (failure.py)
            failure.record_peers(self.agree((failure.this_host(), os.getpid()),
                                            "the exchange of the ranks' pids (compile)"))
            # the end's deadline: the job's (never a short one a single compile asked
            # for: ranks may reach their exit seconds apart), or a longer compile's
            end_guard.arm(self.duplicate(base), max(self.recv_timeout, resolve_timeout()))
            abnormal_end.drop_native_hangup_handler()
        elif self.on_world and self.size > 1:
            end_guard.arm(None, self.recv_timeout)

    def same_ranks(self, other) -> bool:
        """Does `other` (a world of another compile) number the same processes alike?
        Each compile duplicates its communicator: the duplicates are congruent."""
        return isinstance(other, MPIWorld) and MPI.Comm.Compare(self.comm, other.comm) in (
            MPI.IDENT, MPI.CONGRUENT)

    def duplicate(self, base):
        """base.Dup() with a deadline (no communicator to diagnose on exists yet)."""
        comm, request = base.Idup()
        try:
            wait_with_deadline(request.Test, self.recv_timeout, lambda: "compile()")
        except RecvTimeout:
            ABANDONED.append((comm, request))
            raise RankUnresponsive(f"rank {self.rank}: not every rank of the {self.size} "
                                   f"entered compile() within {self.recv_timeout:g} s"
                                   + FINAL) from None
        return comm

    def barrier(self, what):
        """Wait until every rank got here (with a deadline): guards the MPI calls that
        have no nonblocking form (Comm.Split_type) when they follow."""
        self.wait(self.comm.Ibarrier(), what)

    def __del__(self):
        # Every compile() duplicates the communicator; never freed, MPICH runs out of
        # context ids after ~2000 compiles in one job. Freeing is local in practice and the
        # next Dup only takes an id free on every rank, so ranks may free at different
        # moments; after MPI_Finalize (interpreter exit) there is nothing to free.
        for name in ("comm", "control"):
            comm = getattr(self, name, None)
            if comm is not None and comm != MPI.COMM_NULL and not MPI.Is_finalized():
                comm.Free()

    def __repr__(self) -> str:
        return f"MPIWorld(rank {self.rank} of {self.size})"

    def local_ranks(self):
        return (self.rank,)

    def setup_node(self, device, threads, task_threads, gpus=None):
        """The GPU of this rank's node-local number, then the node's BLAS thread budget.

        The device comes first: it imports the kernel backend and so loads its BLAS
        (scipy's OpenBLAS), which threadpoolctl can only limit once loaded. GPUs are
        numbered per node, so the GPU follows the node-local rank, not the global one.
        """
        from . import threads as node_threads
        self.barrier("the node setup of compile() (GPU and BLAS threads)")
        if node_threads.ranks_outnumber_cores(self.comm):
            self.send_grace_s = CROWDED_SEND_GRACE_SECONDS   # see executor.py
        selected = select_device(device, node_threads.local_rank(self.comm), gpus)
        threading = TaskThreads(*node_threads.configure_rank_threads(
            self.comm, threads, task_threads), node_threads.ensure_blas_threads)
        return selected, threading

    def transport(self, rank, epoch=0):
        return MPITransport(self.comm, self.recv_timeout, (epoch % self.epochs) * TAG_LIMIT)

    def run(self, executors: dict):
        executor = executors[self.rank]
        try:
            with flight.Armed(self, executor):
                executor.run(blocking=True)
        except BaseException as error:
            flight.record_failure(self.rank, self.size, self.where,
                                  f"{type(error).__name__}: {error}"[:2000], executor)
            # receives are cancelled; sends cannot be, and a late peer may still read
            # them, so their tiles must outlive the store's cleanup (they carry this
            # execute's tag epoch: no later execute can match them)
            executor.transport.cancel_receives()
            ABANDONED.append(executor.in_flight_sends())
            if isinstance(error, RecvTimeout):
                raise self.unresponsive(f"a message ({error})") from None
            raise

    # -- guarded waits ---------------------------------------------------------------
    def wait(self, request, what):
        """Complete `request`; past the deadline raise RankUnresponsive naming silent ranks."""
        try:
            wait_with_deadline(request.Test, self.recv_timeout, lambda: what)
        except RecvTimeout:
            # final: MPI cannot cancel a collective, so this communicator is unusable
            ABANDONED.append(request)
            flight.record_failure(self.rank, self.size, self.where,
                                  f"timed out after {self.recv_timeout:g} s in {what}")
            raise self.unresponsive(what) from None

    def unresponsive(self, what):
        # failure's pid table is of COMM_WORLD's ranks: it names ours only on COMM_WORLD
        known_silent = failure.silent_peers(self.rank) if self.on_world else ()
        return unresponsive_error(self.control, self.rank, self.size, what, self.where,
                                  self.recv_timeout, known_silent)

    def fetch_tile(self, stores, key, owner, root, tile_shape_dtype):
        """The tile on every rank (root=None) or on `root` only (None elsewhere)."""
        if owner < 0:
            return stores[self.rank][key]
        shape, dtype = tile_shape_dtype
        mine = stores[self.rank][key] if owner == self.rank else \
            np.empty(shape, dtype=dtype, order="F")
        what = f"tile {key[0]}{list(key[1])} from rank {owner}"
        if root is None:
            self.wait(self.comm.Ibcast([byte_view(mine), MPI.BYTE], root=owner),
                      f"the broadcast of {what}")
            return mine
        if owner != root:
            if self.rank == owner:
                self.wait(self.comm.Isend([byte_view(mine), MPI.BYTE], dest=root, tag=0),
                          f"rank {root} to receive {what}")
            elif self.rank == root:
                self.wait(self.comm.Irecv([byte_view(mine), MPI.BYTE], source=owner, tag=0),
                          what)
        return mine if self.rank == root else None

    def agree(self, value, what="an exchange of small values"):
        """All ranks' values (an allgather of small picklable objects), with a deadline."""
        payload = np.frombuffer(pickle.dumps(value), dtype=np.uint8)
        lengths = np.zeros(self.size, dtype=np.int64)
        self.wait(self.comm.Iallgather([np.array([payload.size], dtype=np.int64), MPI.INT64_T],
                                       [lengths, MPI.INT64_T]), what)
        gathered = np.empty(int(lengths.sum()), dtype=np.uint8)
        offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        self.wait(self.comm.Iallgatherv([payload, MPI.BYTE],
                                        [gathered, (lengths, offsets), MPI.BYTE]), what)
        return [pickle.loads(gathered[start:start + length].tobytes())
                for start, length in zip(offsets.tolist(), lengths.tolist())]

    def check_fingerprint(self, values, what):
        """Every rank's int64 vector `values` (on the control communicator, so a rank
        that diverged into another collective cannot match it)."""
        mine = np.asarray(values, dtype=np.int64)
        every = np.empty((self.size, mine.size), dtype=np.int64)
        self.wait(self.control.Iallgather([mine, MPI.INT64_T], [every, MPI.INT64_T]), what)
        return every
