"""Runtime layer: clean-ups that must run however a rank ends, not only at a normal exit.

atexit and weakref.finalize run at a normal interpreter exit only. A rank that
raises ends in MPI_Abort (runtime/failure.py), and mpiexec, srun and Slurm stop
ranks with SIGTERM or SIGHUP, whose default action ends the process at once: the
offload arenas (64 MiB files per rank) stayed on disk after every such end. A
clean-up registered here also runs in the abort hook and, where the signal still
has its default action, in a handler that cleans up and then ends the process by
the same signal, so the exit status is what it would have been. SIGKILL cannot be
caught: what it leaves is removed at the next start (offload_files.remove_stale).
Imports no mpi4py.
"""

from __future__ import annotations

import os
import signal
import threading

CAUGHT_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
_cleanups = {}              # key -> function, run once each
_lock = threading.Lock()
_handled = set()            # signals whose handler is installed


def register(key, function) -> None:
    """Run `function()` if this process ends by an abort or a caught signal."""
    with _lock:
        _cleanups[key] = function
    install_signal_handlers()


def unregister(key) -> None:
    with _lock:
        _cleanups.pop(key, None)


def run_cleanups() -> None:
    """Run and forget every registered clean-up; errors are ignored (we are ending)."""
    with _lock:
        functions = list(_cleanups.values())
        _cleanups.clear()
    for function in functions:
        try:
            function()
        except Exception:       # noqa: BLE001 - the process is ending; clean what we can
            pass


def install_signal_handlers() -> None:
    """Catch CAUGHT_SIGNALS where they still have their default action (a user's own
    handler is left alone); only the main thread may install handlers."""
    if threading.current_thread() is not threading.main_thread():
        return
    for signum in CAUGHT_SIGNALS:
        if signum not in _handled and signal.getsignal(signum) == signal.SIG_DFL:
            signal.signal(signum, clean_and_die)
            _handled.add(signum)


def process_state(pid: int) -> str:
    """The state letter of process `pid` in /proc ("R", "S", "T" stopped, "Z" ...), or
    "" when unknown (no /proc, another user's)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""


def process_alive(pid: int) -> bool:
    """Is process `pid` of this host running? A zombie (killed, not yet reaped by
    mpiexec) counts as ended."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:     # another user's process: alive
        return True
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):   # no /proc (not Linux): kill(0) said alive
        return True


def clean_and_die(signum, frame) -> None:
    run_cleanups()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)     # the default action: the process ends by this signal


def drop_native_hangup_handler() -> None:
    """Give SIGHUP back its default action where Python holds no handler for it.

    UCX (under MPICH's ch4:ucx) takes SIGHUP at MPI_Init as its debug signal: the rank
    kept running with DEBUG logging on and no clean-up ran. Python still reports
    SIG_DFL for it (its table predates MPI_Init), so setting SIG_DFL again through
    Python removes the native handler; a handler the script set stays. rank_entry.py
    and `import nntile_spmd` also set UCX_DEBUG_SIGNO=0 before MPI starts."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGHUP) == signal.SIG_DFL:
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
