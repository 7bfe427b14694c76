"""Ping-pong between ranks 0 and 1 (run under mpiexec -n 2): writes "latency
bandwidth send_a send_b recv_a recv_b spin_share" to the file named by argv[1].

latency (s) and bandwidth (B/s): a blocking ping-pong of 1 byte and of 16 MiB.
send_a + send_b * bytes: the CPU seconds a rank spends to post one tile's SEND
through the runtime's own transport; recv_a + recv_b * bytes: to post its RECV
and complete it once the message is there (the receiver copies the payload out of
shared memory or the sender's pages, so this grows with the bytes).

spin_share: both ranks bound to one core, rank 0 computes for a while, sends a
tile and waits for it back; rank 1 sends it back at once and waits for the next,
both waiting as the executor does (test, sched_yield). Rank 1's CPU time over rank
0's: how much of its core-mate's lead a waiting rank spins away (turns.py)."""

import os
import sys
import time
from contextlib import contextmanager

import numpy as np
from mpi4py import MPI

from ..runtime.mpi_world import MPITransport
from .calibrate import fit_rates

MESSAGE_SIZES = (4 << 10, 64 << 10, 256 << 10, 1 << 20)
MESSAGES = 32


def round_trip(comm, buffer, repeats) -> float:
    peer = 1 - comm.rank
    comm.Barrier()
    start = time.perf_counter()
    for _ in range(repeats):
        if comm.rank == 0:
            comm.Send(buffer, peer)
            comm.Recv(buffer, peer)
        else:
            comm.Recv(buffer, peer)
            comm.Send(buffer, peer)
    return (time.perf_counter() - start) / repeats / 2       # one way


def message_costs(comm, nbytes, repeats=5) -> tuple:
    """(send seconds, receive seconds) per message of `nbytes`, best of `repeats`.

    Neither side waits for the other inside a timed part: rank 1 posts its
    receives, rank 0 then posts its sends, and rank 1, after a pause without MPI
    calls (the payload waits for it: MPI moves it only inside the receiver's calls,
    as during a kernel), completes the receives."""
    transport, clock = MPITransport(comm, timeout=60.0), time.perf_counter
    buffers = [np.ones(nbytes // 4, np.float32) for _ in range(MESSAGES)]
    best_send = best_recv = float("inf")
    for _ in range(repeats):
        comm.Barrier()
        if comm.rank == 1:
            start = clock()
            handles = [transport.post_recv(0, tag, buffer) for tag, buffer in enumerate(buffers)]
            post_s = clock() - start
        comm.Barrier()
        if comm.rank == 0:
            start = clock()
            handles = [transport.post_send(1, tag, buffer) for tag, buffer in enumerate(buffers)]
            best_send = min(best_send, (clock() - start) / MESSAGES)
            for handle in handles:
                transport.wait_send(handle)
            continue
        time.sleep(0.02)
        start = clock()
        for handle, buffer in zip(handles, buffers):
            while not transport.test_recv(handle):
                pass
            transport.finish_recv(handle, buffer)
        best_recv = min(best_recv, (post_s + clock() - start) / MESSAGES)
    return best_send, best_recv


@contextmanager
def on_one_core(comm):
    """Bind every rank of `comm` to the same core (the lowest one they all name),
    and give each its own cores back afterwards (Linux: os.sched_setaffinity)."""
    allowed = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {comm.allreduce(min(allowed), op=MPI.MIN)})
    try:
        yield
    finally:
        os.sched_setaffinity(0, allowed)


def spin_share(comm, compute_s=250e-6, rounds=200) -> float:
    """Rank 1's CPU time over rank 0's in a ping-pong on one core (see above); 0.0
    where processes cannot be bound to a core."""
    if not hasattr(os, "sched_getaffinity"):
        return 0.0
    transport, clock = MPITransport(comm, timeout=60.0), time.perf_counter
    tile = np.ones(128, np.float32)
    with on_one_core(comm):
        comm.Barrier()
        cpu = time.process_time()
        for tag in range(rounds):
            if comm.rank == 0:
                end = clock() + compute_s       # computes: a busy loop
                while clock() < end:
                    pass
                transport.wait_send(transport.post_send(1, tag, tile))
                handle = transport.post_recv(1, tag, tile)
            else:
                handle = transport.post_recv(0, tag, tile)
            transport.wait_recv(handle, lambda: "spin_share")
            transport.finish_recv(handle, tile)
            if comm.rank == 1:
                transport.wait_send(transport.post_send(0, tag, tile))
        cpu = time.process_time() - cpu
    computing, waiting = comm.allgather(cpu)
    return min(1.0, waiting / computing)


def main():
    comm = MPI.COMM_WORLD
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    small, large = np.zeros(1, np.uint8), np.zeros(1 << 24, np.uint8)
    round_trip(comm, small, 10)
    latency = min(round_trip(comm, small, repeats) for _ in range(3))
    large_s = min(round_trip(comm, large, 5) for _ in range(3))
    bandwidth = large.nbytes / max(large_s - latency, 1e-9)
    costs = [message_costs(comm, nbytes) for nbytes in MESSAGE_SIZES]
    sends = comm.bcast([send for send, _ in costs], root=0)
    receives = comm.bcast([recv for _, recv in costs], root=1)
    share = spin_share(comm)
    if comm.rank == 0:
        # seconds = a + b * bytes, fitted as a task's a + b * work is: one "task" a message
        rates = fit_rates([("send", 1, n, s) for n, s in zip(MESSAGE_SIZES, sends)]
                          + [("recv", 1, n, s) for n, s in zip(MESSAGE_SIZES, receives)])
        (send_a, send_b), (recv_a, recv_b) = rates["send"], rates["recv"]
        with open(sys.argv[1], "w") as out:
            out.write(f"{latency} {bandwidth} {send_a} {send_b} {recv_a} {recv_b} {share}\n")


if __name__ == "__main__":
    main()
