"""Runtime layer: a rank that raises ends the whole MPI job promptly.

MPI's default is to let the other ranks wait forever in a receive or collective.
When the process was started by an MPI launcher with more than one rank, we
install a sys.excepthook that prints the traceback once, prefixed by the rank,
and calls MPI_Abort, which makes mpiexec/srun kill every rank and exit non-zero.
It is installed at `import nntile_spmd` (from the launcher's environment, without
loading mpi4py) so it also covers errors raised before compile(), and it works
for plain `mpiexec -n N python script.py`, not only under `python -m mpi4py`.

A rank killed by a signal cannot say so, and a peer's MPI call may fail first
(MPICH: "process_vm_readv failed" reading the dead rank's memory), so the first
message named the wrong rank. The hook therefore names the ranks on this host whose
process is gone (the world's (host, pid) table, gathered at the first compile).
"""

from __future__ import annotations

import array
import os
import socket
import stat
import sys
import time
import traceback

from ..rank_entry import launched_rank_and_size, leave_hangup_alone
from . import abnormal_end, flight

_installed = False
PEERS = {}      # world rank -> (host, pid), set by the first MPIWorld over COMM_WORLD


def record_peers(table) -> None:
    """Remember every world rank's (host, pid), so an abort can name a dead one."""
    PEERS.update(enumerate(table))


def this_host() -> str:
    return socket.gethostname()


def dead_peers(rank) -> list:
    """(rank, host, pid) of the other ranks on this host whose process has ended."""
    host = this_host()
    return [(peer, peer_host, pid) for peer, (peer_host, pid) in sorted(PEERS.items())
            if peer != rank and peer_host == host and not abnormal_end.process_alive(pid)]


def silent_peers(rank) -> set:
    """The other ranks on this host that cannot answer: ended, or stopped (SIGSTOP)."""
    host = this_host()
    return {peer for peer, (peer_host, pid) in PEERS.items() if peer != rank and
            peer_host == host and (not abnormal_end.process_alive(pid)
                                   or abnormal_end.process_state(pid) in ("T", "t"))}


def abort_header(rank, error) -> str:
    """The first line of an abort: the dead ranks, when there are, come first."""
    dead = dead_peers(rank)
    if dead:
        names = "; ".join(f"rank {peer} (pid {pid} on {host}) has died" for peer, host, pid
                          in dead)
        return (f"[rank {rank}] {names}: the error it caused on rank {rank} ends the job "
                "(the launcher's message may name the pid):\n")
    header = f"[rank {rank}] uncaught exception, aborting the job:\n"
    if type(error).__module__.startswith("mpi4py") and PEERS:
        pids = ", ".join(f"rank {peer} = pid {pid} on {host}"
                         for peer, (host, pid) in sorted(PEERS.items()))
        header += (f"[rank {rank}] an MPI error usually follows the death of another rank; "
                   f"if the launcher names a pid: {pids}\n")
    return header


def install_abort_on_error(rank=None, size=None):
    """Make an uncaught exception on this rank abort the whole job (size > 1)."""
    global _installed
    if rank is None or size is None:
        launched = launched_rank_and_size()
        if launched is None:
            return
        rank, size = launched
    if _installed or size <= 1:
        return
    leave_hangup_alone()
    previous_hook = sys.excepthook

    def abort_hook(kind, value, trace):
        text = "".join(traceback.format_exception(kind, value, trace))
        sys.stderr.write(abort_header(rank, value) + text)
        sys.stderr.flush()
        wait_until_read(sys.stderr)
        if kind is KeyboardInterrupt:
            previous_hook(kind, value, trace)
        flight.record_failure(rank, size, flight.latest_where(),
                              f"{kind.__name__}: {value}"[:2000])
        abnormal_end.run_cleanups()    # MPI_Abort ends the process without atexit
        from mpi4py import MPI   # loaded only now: importing it initializes MPI
        MPI.COMM_WORLD.Abort(1)

    sys.excepthook = abort_hook
    _installed = True


def wait_until_read(stream, limit_s=2.0):
    """Return once the launcher has read all this rank wrote to `stream`, if a pipe.

    MPI_Abort tears the job down at once: text the launcher has not yet read from
    the rank's pipe is lost with it, and the job ends with no word of its cause.
    Linux answers FIONREAD on either end of a pipe with the bytes still in it.
    """
    try:
        import fcntl
        import termios
        descriptor = stream.fileno()
        if not stat.S_ISFIFO(os.fstat(descriptor).st_mode):
            return
    except (ImportError, AttributeError, OSError, ValueError):
        return
    unread, deadline = array.array("i", [0]), time.monotonic() + limit_s
    while time.monotonic() < deadline:
        try:
            fcntl.ioctl(descriptor, termios.FIONREAD, unread)
        except OSError:
            return
        if unread[0] == 0:
            return
        time.sleep(0.001)
