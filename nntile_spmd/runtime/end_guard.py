"""Runtime layer: the end of the job has a deadline too, and names the rank that missed it.

At interpreter exit every rank waits in MPI_Finalize for the others, which no
deadline covered: a rank stopped (SIGSTOP) or hung after its last library call hung
the job forever. The first compile over COMM_WORLD therefore registers an exit
handler (Python's atexit runs before mpi4py's MPI_Finalize) in which each rank
announces that it reached the end and waits, against the deadline (recv_timeout),
for a nonblocking barrier of every rank; at the deadline the job ends naming the
ranks that never arrived. Arrival notes go to two collector ranks (the first and the
last), so the end costs one message per rank and a barrier.

A rank of this host that ends while the others wait there (os._exit(0), a kill
after the last call; mpiexec reported the first as success) ends the job at once,
named. A rank killed while the job runs is named by the launcher (its rank
supervisors, rank_entry.py): under plain mpiexec the other ranks are killed within
microseconds, before any of them could say a word.
"""

from __future__ import annotations

import atexit
import os
import select
import sys
import time

from mpi4py import MPI

from ..rank_entry import SUPERVISED_VAR
from . import abnormal_end, failure

ARRIVED_TAG = 11
POLL_S = 0.005
# A rank that is not a collector waits this much past the deadline, so that the
# collectors, who know which ranks are missing, speak first.
COLLECTOR_HEAD_START_S = 2.0
# A peer of this host seen gone may have passed the barrier already (its completion
# and ours are not simultaneous): unless a collector knows it never arrived, give MPI
# this long.
GONE_GRACE_S = 1.0
NOTE_TESTS = 100
SUPERVISOR_GRACE_S = 0.5

_state = {}     # "comm", "timeout": set by arm()


def arm(comm, timeout: float) -> None:
    """Register the guarded end, once per process (`comm`: a duplicate of COMM_WORLD
    reserved for it, made collectively by every rank's first compile); a later
    compile's call (comm None) only lengthens the deadline."""
    if "comm" in _state:
        _state["timeout"] = max(_state["timeout"], timeout)
        return
    if comm is None:
        return
    _state.update(comm=comm, timeout=timeout)
    atexit.register(wait_for_every_rank)


def collectors(size: int) -> tuple:
    return tuple(sorted({0, size - 1}))


def wait_for_every_rank() -> None:
    """At exit: return once every rank got here; else end the job naming who did not."""
    comm, timeout = _state.get("comm"), _state.get("timeout", 0.0)
    if comm is None or MPI.Is_finalized():
        return
    rank, size = comm.Get_rank(), comm.Get_size()
    sends = [comm.Isend([b"", MPI.BYTE], dest=peer, tag=ARRIVED_TAG)
             for peer in collectors(size) if peer != rank]
    arrivals = ({peer: comm.Irecv([bytearray(1), MPI.BYTE], source=peer, tag=ARRIVED_TAG)
                 for peer in range(size) if peer != rank} if rank in collectors(size) else {})
    barrier = comm.Ibarrier()
    start = time.monotonic()
    deadline = start + timeout + (0.0 if arrivals else COLLECTOR_HEAD_START_S)
    gone_since, exits = None, PeerExits(rank)
    try:
        while not barrier.Test():
            now = time.monotonic()
            gone = ({peer for peer, _, _ in failure.dead_peers(rank)} if exits.seen
                    else set())
            heard = arrived(arrivals)   # after `gone`: a note sent before the end counts
            if gone:
                gone_since = gone_since or now
                # a collector knows a gone peer that never arrived: abnormal, and at once,
                # for mpiexec kills the other ranks within milliseconds (the repeated
                # tests first let MPI deliver a note sent just before the peer ended)
                if heard is not None and gone - arrived(arrivals, NOTE_TESTS):
                    end_the_job(rank, size, heard, timeout, now - start)
                if now - gone_since > GONE_GRACE_S:
                    end_the_job(rank, size, heard, timeout, now - start)
            if now > deadline:
                end_the_job(rank, size, heard, timeout, now - start)
            exits.wait(POLL_S)
    finally:
        exits.close()
    MPI.Request.Waitall(sends + list(arrivals.values()))


class PeerExits:
    """Wakes the end's wait the moment a same-host peer's process ends (pidfd, Linux
    5.3+: no /proc polling while every peer lives); without pidfds, every wait wakes."""

    def __init__(self, rank: int):
        host, self.descriptors = failure.this_host(), []
        self.seen = False       # a peer ended (or cannot be watched): look in /proc
        for peer, (peer_host, pid) in failure.PEERS.items():
            if peer != rank and peer_host == host:
                try:
                    self.descriptors.append(os.pidfd_open(pid))
                except (AttributeError, OSError):   # no pidfd, or the peer is gone
                    self.seen = True
        self.poller = select.poll()
        for descriptor in self.descriptors:
            self.poller.register(descriptor, select.POLLIN)

    def wait(self, seconds: float) -> None:
        if self.seen:           # an ended peer's pidfd stays readable: sleep instead
            time.sleep(seconds)
        elif self.poller.poll(seconds * 1000):
            self.seen = True

    def close(self) -> None:
        for descriptor in self.descriptors:
            os.close(descriptor)


def arrived(arrivals, tests=1) -> set | None:
    """The peers whose arrival note came (each request tested up to `tests` times), or
    None on a rank that collects none."""
    if not arrivals:
        return None
    return {peer for peer, request in arrivals.items()
            if any(request.Test() for _ in range(tests))}


def missing_text(rank: int, size: int, heard) -> str:
    """Who did not reach the end, in the words of what this rank can know."""
    dead = failure.dead_peers(rank)
    names = [f"rank {peer} (pid {pid} on {host}) ended without reaching the end of its "
             "program (killed, a crash or os._exit)" for peer, host, pid in dead]
    gone = {peer for peer, _, _ in dead}
    stopped = sorted(failure.silent_peers(rank) - gone)
    if stopped:
        names.append(f"rank(s) {stopped} are stopped (SIGSTOP)")
    if heard is not None:
        absent = sorted(set(range(size)) - heard - {rank} - gone - set(stopped))
        if absent:
            names.append(f"rank(s) {absent} never reached the end (stopped, hung in user "
                         "code, or on another host and gone)")
    return "; ".join(names) or ("some rank never reached the end (the collector ranks "
                                f"{list(collectors(size))} name it)")


def end_the_job(rank, size, heard, timeout, waited) -> None:
    say(f"[rank {rank}] the job cannot end: {missing_text(rank, size, heard)}; rank {rank} "
        f"reached the end of its program and waited {waited:.1f} s for the others "
        f"(deadline {timeout:g} s: compile(recv_timeout=...), $NNTILE_SPMD_RECV_TIMEOUT or "
        "launch --recv-timeout). Aborting the job.\n")
    if os.environ.get(SUPERVISED_VAR) and failure.dead_peers(rank):
        # under the launcher, mpiexec learns of the ended rank only from its supervisor,
        # which records how the rank ended first: our abort must not kill it before that
        time.sleep(SUPERVISOR_GRACE_S)
    abnormal_end.run_cleanups()
    MPI.COMM_WORLD.Abort(1)


def say(text: str) -> None:
    """Write `text` to stderr in one write and wait until mpiexec has read it: the abort
    that follows, or mpiexec's kill, would lose what is still in the pipe."""
    try:
        os.write(sys.stderr.fileno(), text.encode())
    except (OSError, ValueError, AttributeError):
        return
    failure.wait_until_read(sys.stderr, limit_s=0.5)
