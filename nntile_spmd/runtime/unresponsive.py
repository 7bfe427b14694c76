"""Runtime layer: turn a timed-out wait into an error naming the silent rank(s).

When a wait passes its deadline, MPI cannot say which rank is missing. Every rank
that times out tells every other rank where it is, on a communicator reserved for
this, and listens for a short grace period: the ranks not heard from are the ones
that stopped, died or hang elsewhere. This runs only on the failure path, so its
O(ranks^2) messages cost nothing in a healthy job.
"""

from __future__ import annotations

import time

import numpy as np
from mpi4py import MPI

from .executor import RecvTimeout

NOTE_BYTES = 240
DIAGNOSIS_TAG = 7

# Requests whose wait timed out. MPI may still complete them (a late rank) and write
# into their buffers, which mpi4py keeps alive only as long as the request object:
# kept here for the rest of the process, whose job the error normally ends anyway.
ABANDONED = []


RAISE_DEADLINE = ("; if the ranks are only slow (a long step, a checkpoint on a slow file "
                  "system), raise the deadline: compile(recv_timeout=...), "
                  "$NNTILE_SPMD_RECV_TIMEOUT or launch --recv-timeout")
FINAL = (". This error is final (the library's communicators may hold unfinished "
         "operations); uncaught, it ends the job.")


class RankUnresponsive(RecvTimeout):
    """A wait passed its deadline; the message names the ranks that did not answer."""


def encode(text: str) -> np.ndarray:
    raw = text.encode()[:NOTE_BYTES]
    return np.frombuffer(raw.ljust(NOTE_BYTES, b"\0"), dtype=np.uint8).copy()


def listen_for_peers(control, where: str, grace: float, known_silent=()) -> dict:
    """{rank: where it is} of the ranks that answered within `grace` seconds."""
    rank, size = control.Get_rank(), control.Get_size()
    note = encode(f"rank {rank} is in {where}")
    peers = [peer for peer in range(size) if peer != rank]
    sends = [control.Isend([note, MPI.BYTE], dest=peer, tag=DIAGNOSIS_TAG) for peer in peers]
    buffers = {peer: np.zeros(NOTE_BYTES, dtype=np.uint8) for peer in peers}
    receives = {peer: control.Irecv([buffers[peer], MPI.BYTE], source=peer, tag=DIAGNOSIS_TAG)
                for peer in peers}
    # a peer known to be stopped or gone cannot answer: no need to wait for it (the
    # grace was spent in full on a SIGSTOPped rank)
    answering = len(peers) - len(set(known_silent) & set(peers))
    heard, deadline = {}, time.monotonic() + grace
    while len(heard) < answering and time.monotonic() < deadline:
        for peer, request in receives.items():
            if peer not in heard and request.Test():
                heard[peer] = bytes(buffers[peer]).rstrip(b"\0").decode(errors="replace")
        time.sleep(0.01)
    for peer, request in receives.items():
        if peer not in heard:
            request.Cancel()     # nothing may be left posted into our buffers
    ABANDONED.extend(sends)      # a silent peer never receives them: their buffers stay
    ABANDONED.extend(receives.values())
    return heard


def unresponsive_error(control, rank, size, what, where, timeout,
                       known_silent=()) -> RankUnresponsive:
    """The error a rank raises when `what` did not complete within `timeout` seconds;
    `known_silent`: ranks of `control` known to be stopped or gone (not waited for)."""
    grace = min(timeout, 10.0)   # peers time out within a step of each other
    heard = listen_for_peers(control, where, grace, known_silent) if size > 1 else {}
    silent = [peer for peer in range(size) if peer != rank and peer not in heard]
    others = "; ".join(heard[peer] for peer in sorted(heard))
    blame = (f"rank(s) {silent} did not respond (stopped, dead, or hung in user code)"
             if silent else "every rank answered, so the ranks diverged: they wait in "
             "different calls")
    return RankUnresponsive(f"rank {rank} waited more than {timeout:g} s for {what} during "
                            f"{where}: {blame}" + (f"; {others}" if others else "")
                            + RAISE_DEADLINE + FINAL)
