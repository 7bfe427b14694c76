"""Runtime layer: the end of the job has a deadline too, and a rank that leaves early is named.

At interpreter exit every rank waits in MPI_Finalize for the others, which no
deadline covered: a rank stopped (SIGSTOP) or hung after its last library call hung
the job forever. The first compile over COMM_WORLD therefore registers an exit
handler (Python's atexit runs before mpi4py's MPI_Finalize) in which each rank
announces that it reached the end and waits, against the deadline (recv_timeout),
for a nonblocking barrier of every rank; at the deadline the job ends naming the
ranks that never arrived. Arrival notes go to two collector ranks (the first and the
last), so the end costs one message per rank and a barrier.

A rank that leaves early (killed, crashed, os._exit(0)) was named by nobody: mpiexec
kills the others at once and reports a pid it saw end, often one it killed itself.
So each rank also keeps a thread blocked on its same-host peers' processes (pidfd,
Linux 5.3+; no CPU while they live). No rank may end before every rank entered the
end's barrier, so a peer that ends while this rank has not yet entered it ended
abnormally: the thread says so on stderr at once and aborts the job (status 1 even
where mpiexec would report the early rank's 0). Ranks on other hosts are not
watched (a pid means nothing there): the deadline names them.
"""

from __future__ import annotations

import atexit
import os
import select
import sys
import threading
import time

from mpi4py import MPI

from . import abnormal_end, failure

ARRIVED_TAG = 11
POLL_S = 0.005
# A rank that is not a collector waits this much past the deadline, so that the
# collectors, who know which ranks are missing, speak first.
COLLECTOR_HEAD_START_S = 2.0
# A peer of this host seen gone after this rank entered the barrier may have passed
# it already (its completion and ours are not simultaneous): give MPI this long.
GONE_GRACE_S = 1.0

# The watch aborts the job this long after it spoke: mpiexec has normally ended it by
# then; under the launcher the ended rank's supervisor (rank_entry.py) records how it
# ended meanwhile. The abort is for a rank that left by os._exit(0), which mpiexec
# would report as success.
ABORT_DELAY_S = 0.5

_state = {"entered": False, "lost": []}    # "comm", "timeout": set by arm()
_lock = threading.Lock()


def arm(comm, timeout: float) -> None:
    """Register the guarded end and start the peer watch, once per process (`comm`: a
    duplicate of COMM_WORLD reserved for it, made collectively by every rank's first
    compile); a later compile's call (comm None) only lengthens the deadline."""
    if "comm" in _state:
        _state["timeout"] = max(_state["timeout"], timeout)
        return
    if comm is None:
        return
    _state.update(comm=comm, timeout=timeout)
    atexit.register(wait_for_every_rank)
    start_peer_watch(comm.Get_rank())


def collectors(size: int) -> tuple:
    return tuple(sorted({0, size - 1}))


# -- the end ---------------------------------------------------------------------------

def wait_for_every_rank() -> None:
    """At exit: return once every rank got here; else end the job naming who did not."""
    comm, timeout = _state.get("comm"), _state.get("timeout", 0.0)
    if comm is None or MPI.Is_finalized():
        return
    with _lock:
        _state["entered"] = True
        lost_before = list(_state["lost"])
    rank, size = comm.Get_rank(), comm.Get_size()
    if lost_before:       # the watch saw a peer end before we got here: abnormal for sure
        end_the_job(rank, size, None, timeout, 0.0)
    sends = [comm.Isend([b"", MPI.BYTE], dest=peer, tag=ARRIVED_TAG)
             for peer in collectors(size) if peer != rank]
    arrivals = ({peer: comm.Irecv([bytearray(1), MPI.BYTE], source=peer, tag=ARRIVED_TAG)
                 for peer in range(size) if peer != rank} if rank in collectors(size) else {})
    barrier = comm.Ibarrier()
    start = time.monotonic()
    deadline = start + timeout + (0.0 if arrivals else COLLECTOR_HEAD_START_S)
    gone_since = None
    while not barrier.Test():
        now = time.monotonic()
        heard = arrived(arrivals)
        gone = {peer for peer, _, _ in failure.dead_peers(rank)}
        if heard is not None and gone - heard:      # gone without arriving: abnormal
            end_the_job(rank, size, heard, timeout, now - start)
        if gone:
            gone_since = gone_since or now
            if now - gone_since > GONE_GRACE_S:
                end_the_job(rank, size, heard, timeout, now - start)
        if now > deadline:
            end_the_job(rank, size, heard, timeout, now - start)
        time.sleep(POLL_S)
    MPI.Request.Waitall(sends + list(arrivals.values()))


def arrived(arrivals) -> set | None:
    """The peers whose arrival note came, or None on a rank that collects none."""
    if not arrivals:
        return None
    return {peer for peer, request in arrivals.items() if request.Test()}


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


# -- the peers' processes ---------------------------------------------------------------

def start_peer_watch(rank: int) -> None:
    """A daemon thread that wakes when a same-host peer's process ends."""
    host, pidfds = failure.this_host(), {}
    for peer, (peer_host, pid) in failure.PEERS.items():
        if peer != rank and peer_host == host:
            try:
                pidfds[os.pidfd_open(pid)] = (peer, pid)
            except (AttributeError, OSError):   # no pidfd (not Linux 5.3+), or gone
                continue
    if pidfds:
        threading.Thread(target=watch_peers, args=(rank, host, pidfds), daemon=True,
                         name="nntile-spmd-peer-watch").start()


def watch_peers(rank: int, host: str, pidfds: dict) -> None:
    poller = select.poll()
    for descriptor in pidfds:
        poller.register(descriptor, select.POLLIN)
    ended = [pidfds[descriptor] for descriptor, _ in poller.poll()]
    with _lock:
        if _state["entered"]:     # the end's barrier judges from here (see above)
            return
        _state["lost"] = ended
    if MPI.Is_finalized():        # the script called MPI.Finalize itself: ends are normal
        return
    names = " and ".join(f"rank {peer} (pid {pid} on {host})" for peer, pid in sorted(ended))
    say(f"[rank {rank}] {names} ended while rank {rank} was still running its program "
        "(killed by a signal, a crash or os._exit; a traceback above, if any, says why): "
        "the job ends. Any pid mpiexec names may be that of a rank it killed after.\n")
    time.sleep(ABORT_DELAY_S)
    if MPI.Query_thread() >= MPI.THREAD_MULTIPLE:
        abnormal_end.run_cleanups()
        MPI.COMM_WORLD.Abort(1)
