"""Run one rank's script, and mark the rank done when its interpreter ends normally.

The launcher (launch.py) starts every rank as `python .../rank_entry.py script.py
args...` with $NNTILE_SPMD_DONE_DIR naming a directory. A rank whose interpreter
shuts down normally (the script returned, or called sys.exit) writes
`rank<R>.done` there, from the last atexit handler to run. A rank that left by
os._exit, a crash or a signal writes nothing, and since such a rank can still exit
with status 0 (mpiexec then reports success), the launcher checks the markers. Each
rank also writes `rank<R>.pid` ("pid host supervisor-pid") at its start, and
`rank<R>.end` when its script returns: from then on the other ranks have the
deadline to end too (launch_watch.py). On Linux the rank runs in a child of the
process mpiexec started, which supervises it and writes `rank<R>.status` when the
rank ends without finishing (see supervise below): the launcher names that rank.

Standard library only, and run by path, not with -m: importing the package would
load numba and the graph layer into ranks whose script never uses them.
"""

import atexit
import os
import runpy
import signal
import socket
import sys

DONE_DIR_VAR = "NNTILE_SPMD_DONE_DIR"
SUPERVISED_VAR = "NNTILE_SPMD_SUPERVISED"   # set in a rank that runs under supervise()
# UCX (MPICH's ch4:ucx) takes SIGHUP as its debug signal unless told not to: the
# rank then ignored the SIGHUP that ends a job and filled the log with DEBUG lines.
UCX_HANGUP_SETTINGS = {"UCX_DEBUG_SIGNO": "0"}
# (rank variable, size variable) set by MPICH/Hydra, Open MPI, PMIx and Slurm's srun.
LAUNCHER_VARIABLES = (("PMI_RANK", "PMI_SIZE"),
                      ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
                      ("PMIX_RANK", "PMIX_SIZE"),
                      ("SLURM_PROCID", "SLURM_NTASKS"))


def launched_rank_and_size():
    """(rank, size) from the launcher's environment, or None outside a launcher."""
    for rank_name, size_name in LAUNCHER_VARIABLES:
        if rank_name in os.environ and size_name in os.environ:
            try:
                return int(os.environ[rank_name]), int(os.environ[size_name])
            except ValueError:
                continue
    return None


def leave_hangup_alone(environ=None) -> None:
    """Before MPI starts: tell UCX not to take SIGHUP (a user's own setting wins)."""
    environ = os.environ if environ is None else environ
    if "mpi4py.MPI" not in sys.modules:
        for name, value in UCX_HANGUP_SETTINGS.items():
            environ.setdefault(name, value)


def marker_path(directory: str, rank: int) -> str:
    return os.path.join(directory, f"rank{rank}.done")


def pid_path(directory: str, rank: int) -> str:
    return os.path.join(directory, f"rank{rank}.pid")


def end_path(directory: str, rank: int) -> str:
    return os.path.join(directory, f"rank{rank}.end")


def write_marker(path: str, text: str, rank: int) -> None:
    """Write `path` whole or not at all (the launcher reads it while the job runs)."""
    try:
        with open(f"{path}.part", "w") as marker:
            marker.write(text)
        os.replace(f"{path}.part", path)
    except OSError as error:   # the launcher will name this rank: say why here
        print(f"[rank {rank}] cannot write {path}: {error}", file=sys.stderr)


def status_path(directory: str, rank: int) -> str:
    return os.path.join(directory, f"rank{rank}.status")


def main() -> None:
    """Run sys.argv[1] as `python script.py args...` would, markers included."""
    script = sys.argv[1]
    sys.argv = sys.argv[1:]
    # as `python script.py` does: the script's folder first on the path, not ours
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    leave_hangup_alone()
    directory, launched = os.environ.get(DONE_DIR_VAR), launched_rank_and_size()
    if not (directory and launched):
        runpy.run_path(script, run_name="__main__")
        return
    rank = launched[0]
    supervisor = 0      # the pid mpiexec knows this rank by, when it is not ours
    if can_die_with_parent():
        child = os.fork()
        if child:
            supervise(child, directory, rank)      # never returns
        die_with_parent()
        supervisor = os.getppid()
        os.environ[SUPERVISED_VAR] = str(supervisor)
    write_marker(pid_path(directory, rank),
                 f"{os.getpid()} {socket.gethostname()} {supervisor}", rank)
    # registered first, so it runs last: after the script's own exit handlers
    atexit.register(write_marker, marker_path(directory, rank), "", rank)
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit:
        write_marker(end_path(directory, rank), "", rank)
        raise
    write_marker(end_path(directory, rank), "", rank)


# -- the supervisor: this process, parent of the rank ---------------------------------
#
# When one rank is killed, mpiexec kills the others at once and names a pid it saw end,
# often one it killed itself; by then no rank can say who was first. So the process
# mpiexec starts forks before MPI starts: the child runs the script (the MPI rank), this
# parent waits for it. It keeps every descriptor the child inherited (mpiexec's PMI
# socket, the output pipes), so mpiexec learns of the rank's end only when the parent
# exits, after it wrote `rank<R>.status` (how the rank ended) if the rank did not
# finish. The ranks mpiexec kills afterwards are killed through their parents, which
# write nothing: the one status file names the rank that ended first. The parent then
# ends as the child did, so mpiexec reports the same status.

FORWARDED = ("SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGCONT")
PR_SET_PDEATHSIG = 1   # from <linux/prctl.h>


def _prctl():
    try:
        import ctypes
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError, ImportError):
        return None


def can_die_with_parent() -> bool:
    return hasattr(os, "fork") and sys.platform.startswith("linux") and _prctl() is not None


def die_with_parent() -> None:
    """In the child: SIGKILL when the supervisor dies (mpiexec kills the supervisor)."""
    parent = os.getppid()
    _prctl()(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() != parent:     # the supervisor died before prctl
        os._exit(1)


def in_terminal_foreground() -> bool:
    """True when our process group owns the terminal: a Ctrl-C there reached every
    process of the group, the rank included, and must not be sent twice."""
    try:
        with open("/dev/tty") as tty:
            return os.tcgetpgrp(tty.fileno()) == os.getpgrp()
    except OSError:
        return False


def supervise(child: int, directory: str, rank: int) -> None:
    """Wait for the rank `child`, passing it the signals we get; record how it ended if
    it did not finish; end as it ended."""
    def forward(signum, _frame):
        if signum != signal.SIGINT or not in_terminal_foreground():
            try:
                os.kill(child, signum)
            except ProcessLookupError:     # it ended meanwhile: the wait returns
                pass

    for name in FORWARDED:
        signal.signal(getattr(signal, name), forward)
    while True:
        try:
            _, status = os.waitpid(child, 0)
            break
        except ChildProcessError:
            os._exit(1)
        except KeyboardInterrupt:   # SIGINT is handled above; never lose the wait
            continue
    if not os.path.exists(marker_path(directory, rank)):
        write_marker(status_path(directory, rank), describe_status(status), rank)
    if not os.WIFSIGNALED(status):
        os._exit(os.WEXITSTATUS(status))
    signum = os.WTERMSIG(status)
    if signum != signal.SIGKILL:       # SIGKILL has its default action already
        signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
    os._exit(128 + signum)     # a signal whose default action is not to end


def describe_status(status: int) -> str:
    if os.WIFSIGNALED(status):
        signum = os.WTERMSIG(status)
        return f"was killed by signal {signum} ({signal.Signals(signum).name})"
    return (f"exited with status {os.WEXITSTATUS(status)} without finishing its program "
            "(os._exit, or an exit after a fatal error)")


if __name__ == "__main__":
    main()
