"""Start an SPMD script on N MPI ranks with a sane per-rank thread budget.

Usage::

    python -m nntile_spmd.launch -n N [--threads T] [--launcher auto|mpiexec|srun]
                                 [--launcher-arg ARG ...] [--dry-run] script.py [args ...]

* Launcher: ``srun`` inside a Slurm allocation (``SLURM_JOB_ID`` set and
  ``srun`` on PATH), otherwise the ``mpiexec`` next to ``sys.executable`` (the
  one from the ``mpich`` wheel in the venv), otherwise ``mpiexec`` on PATH.
* Threads: every rank gets ``T`` threads (``--threads``, else
  ``NNTILE_SPMD_THREADS``, else ``SLURM_CPUS_PER_TASK`` under srun, else
  usable cores // ranks per node, at least 1), exported to the ranks as
  OMP_NUM_THREADS, OPENBLAS_NUM_THREADS, MKL_NUM_THREADS, NUMBA_NUM_THREADS and
  NNTILE_SPMD_THREADS, so the ranks never oversubscribe the node by default.
  Inside a rank the T threads run tile tasks side by side (BLAS one thread per
  task); ``--task-threads K`` exports NNTILE_SPMD_TASK_THREADS=K: K tasks at a
  time, BLAS T // K threads each (K = 1: the serial executor, BLAS on T threads).
* Device: ``--device cpu|cuda|auto`` exports NNTILE_SPMD_DEVICE, what compile's
  default ``device="auto"`` means on every rank (runtime/device_choice.py); each
  GPU rank picks GPU ``local_rank % n_gpus`` of the GPUs it sees.
* Deadline: ``--recv-timeout S`` exports NNTILE_SPMD_RECV_TIMEOUT, the seconds
  any wait of the library may last before the job ends naming the silent rank.
* Signals: SIGTERM, SIGINT, SIGHUP and SIGQUIT sent to the launcher are passed
  to mpiexec/srun (which stops the ranks), and mpiexec/srun get SIGTERM when the
  launcher dies, even by SIGKILL (Linux parent-death signal), so no rank
  outlives it. A Ctrl-C at the terminal already reaches mpiexec (same process
  group), so SIGINT is forwarded only when it did not come from the terminal.
* The exit code is the launcher's (that is, the ranks'). Each rank runs under
  rank_entry.py, which marks the rank done when its interpreter ends normally; a
  rank that ended otherwise (os._exit, a crash) with mpiexec still reporting
  success makes the launcher exit 1 naming the rank. The markers go to a fresh
  temporary directory, or under $NNTILE_SPMD_DONE_DIR when set (on several nodes
  without one shared /tmp, name a folder they all share; under srun on several
  nodes the default is the current directory).
* Naming: rank_entry.py supervises each rank from a parent process that records
  how the rank ended before mpiexec learns of it, so the launcher names the rank
  that ended first, not the pid mpiexec reports (launch_watch.py).
* End deadline: once one rank's script has returned, the others get the deadline
  (--recv-timeout, else $NNTILE_SPMD_RECV_TIMEOUT, else 300 s) plus 5 s to end
  theirs; past it the launcher names them (stopped or running) and ends the job.

This module only uses the standard library: the launcher process must not
initialise MPI itself.
"""

import argparse
import ctypes
import math
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile

from .launch_watch import RankWatch
from .rank_entry import DONE_DIR_VAR, in_terminal_foreground, marker_path

THREAD_ENV_VARS = (
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "NUMBA_NUM_THREADS",
    "NNTILE_SPMD_THREADS",
)
RECV_TIMEOUT_VAR = "NNTILE_SPMD_RECV_TIMEOUT"   # runtime/timeouts.py reads it
DEFAULT_RECV_TIMEOUT_S = 300.0                  # runtime/timeouts.py's default
END_DEADLINE_MARGIN_S = 5.0
# Launcher options that take a separate value (used to find where the script starts).
TASK_THREADS_VAR = "NNTILE_SPMD_TASK_THREADS"   # runtime/thread_budget.py reads it
DEVICE_VAR = "NNTILE_SPMD_DEVICE"               # runtime/device_choice.py reads it
_VALUE_OPTIONS = {"-n", "--np", "--threads", "--task-threads", "--launcher", "--launcher-arg",
                  "--recv-timeout", "--device"}
FORWARDED_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)
RANK_ENTRY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "rank_entry.py")
PR_SET_PDEATHSIG = 1   # from <linux/prctl.h>


def build_parser():
    """Return the argument parser for the launcher's own options."""
    parser = argparse.ArgumentParser(
        prog="python -m nntile_spmd.launch",
        usage="%(prog)s -n N [options] script.py [args ...]",
        description="Run script.py on N MPI ranks (mpiexec or srun).",
        epilog="Everything from script.py on is passed to the script unchanged.",
        allow_abbrev=False,
    )
    parser.add_argument("-n", "--np", dest="n", type=int, required=True,
                        help="number of MPI ranks")
    parser.add_argument("--threads", type=int, default=None,
                        help="threads per rank (default: cores // ranks per node)")
    parser.add_argument("--task-threads", type=int, default=None,
                        help="of those, threads running tile tasks side by side "
                             f"(exports {TASK_THREADS_VAR}; default: all of them)")
    parser.add_argument("--launcher", choices=("auto", "mpiexec", "srun"),
                        default="auto", help="which launcher to use (default: auto)")
    parser.add_argument("--launcher-arg", action="append", default=[],
                        metavar="ARG",
                        help="extra argument for mpiexec/srun, e.g. "
                             "--launcher-arg=--oversubscribe (repeatable)")
    parser.add_argument("--recv-timeout", type=float, default=None, metavar="SECONDS",
                        help="seconds a rank may wait for another before the job ends "
                             f"with an error naming it (exports {RECV_TIMEOUT_VAR}; "
                             "default 300)")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default=None,
                        help=f"what device='auto' means on the ranks (exports {DEVICE_VAR}; "
                             "default: as set, else cuda where a GPU runs a test kernel)")
    parser.add_argument("--dry-run", action="store_true",
                        help="print the command and environment, do not run")
    return parser


def split_argv(argv):
    """Split argv into (launcher options, [script, script args...])."""
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            return argv[:i], argv[i + 1:]
        if not arg.startswith("-") or arg == "-":
            return argv[:i], argv[i:]
        i += 2 if arg in _VALUE_OPTIONS else 1
    return argv, []


def parse_args(argv):
    """Parse the command line into (options namespace, program argv)."""
    parser = build_parser()
    options, program = split_argv(list(argv))
    args = parser.parse_args(options)
    if not program:
        parser.error("missing the script to run")
    if args.n < 1:
        parser.error("-n must be at least 1")
    if args.threads is not None and args.threads < 1:
        parser.error("--threads must be at least 1")
    if args.task_threads is not None and args.task_threads < 1:
        parser.error("--task-threads must be at least 1")
    if args.recv_timeout is not None and not 0 < args.recv_timeout < math.inf:
        parser.error("--recv-timeout must be a positive number of seconds")
    return args, program


def in_slurm_allocation(env=None):
    """Return True if running inside a Slurm allocation with srun available."""
    env = os.environ if env is None else env
    return bool(env.get("SLURM_JOB_ID")) and find_srun(env) is not None


def find_srun(env=None):
    """Return the path of srun on PATH, or None."""
    env = os.environ if env is None else env
    return shutil.which("srun", path=env.get("PATH"))


def find_mpiexec(env=None):
    """Return the mpiexec next to sys.executable, else the one on PATH, else None."""
    env = os.environ if env is None else env
    local = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    if os.path.isfile(local) and os.access(local, os.X_OK):
        return local
    return shutil.which("mpiexec", path=env.get("PATH"))


def choose_launcher(name, env=None):
    """Resolve 'auto' into 'srun' or 'mpiexec'."""
    if name != "auto":
        return name
    return "srun" if in_slurm_allocation(env) else "mpiexec"


def usable_cores():
    """Return how many cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def ranks_per_node(n, launcher, env=None):
    """Return how many of the n ranks land on one node (Slurm spreads them evenly)."""
    env = os.environ if env is None else env
    nodes = _positive_int(env.get("SLURM_NNODES")) if launcher == "srun" else None
    return math.ceil(n / nodes) if nodes else n


def default_threads(n, launcher, env=None):
    """Return threads per rank: NNTILE_SPMD_THREADS, SLURM_CPUS_PER_TASK or cores // ranks."""
    env = os.environ if env is None else env
    threads = _positive_int(env.get("NNTILE_SPMD_THREADS"))
    if threads is None and launcher == "srun":
        threads = _positive_int(env.get("SLURM_CPUS_PER_TASK"))
    if threads is None:
        threads = max(1, usable_cores() // ranks_per_node(n, launcher, env))
    return threads


def _positive_int(value):
    """Return value as a positive int, or None if it is unset or invalid."""
    try:
        number = int(str(value).strip())
    except ValueError:
        return None
    return number if number > 0 else None


def child_env(threads, env=None, recv_timeout=None, task_threads=None, device=None):
    """Return the environment for the ranks: env plus the thread variables."""
    env = dict(os.environ if env is None else env)
    env.update({name: str(threads) for name in THREAD_ENV_VARS})
    if recv_timeout is not None:
        env[RECV_TIMEOUT_VAR] = repr(float(recv_timeout))
    if task_threads is not None:
        env[TASK_THREADS_VAR] = str(task_threads)
    if device is not None:
        env[DEVICE_VAR] = device
    return env


def build_command(launcher, n, threads, program, extra=(), env=None):
    """Return the argv that starts program on n ranks with the given launcher."""
    python = sys.executable
    if launcher == "srun":
        srun = find_srun(env)
        if srun is None:
            raise FileNotFoundError("srun not found on PATH")
        head = [srun, "-n", str(n), "--cpu-bind=cores", f"--cpus-per-task={threads}"]
    elif launcher == "mpiexec":
        mpiexec = find_mpiexec(env)
        if mpiexec is None:
            raise FileNotFoundError(
                "mpiexec not found next to the Python interpreter nor on PATH "
                "(pip install mpich, or load your cluster's MPI module)")
        head = [mpiexec, "-n", str(n)]
    else:
        raise ValueError(f"unknown launcher {launcher!r}")
    return [*head, *extra, python, RANK_ENTRY, *program]


def format_dry_run(launcher, n, threads, command, recv_timeout=None, task_threads=None,
                   device=None):
    """Return the text --dry-run prints: a summary and a copy-pasteable command."""
    assignments = [f"{name}={threads}" for name in THREAD_ENV_VARS]
    if recv_timeout is not None:
        assignments.append(f"{RECV_TIMEOUT_VAR}={float(recv_timeout)!r}")
    if task_threads is not None:
        assignments.append(f"{TASK_THREADS_VAR}={task_threads}")
    if device is not None:
        assignments.append(f"{DEVICE_VAR}={device}")
    return (f"# launcher: {launcher}, ranks: {n}, threads per rank: {threads}\n"
            + shlex.join(["env", *assignments, *command]))


def run(command, env, watch=None):
    """Run command, forwarding signals to it, and return its exit code; `watch`
    (launch_watch.RankWatch) follows the ranks meanwhile."""
    # mpiexec stays in our process group: in its own, reading a terminal stdin for
    # rank 0 would stop it (SIGTTIN)
    launcher = os.getpid()
    with subprocess.Popen(command, env=env,
                          preexec_fn=lambda: die_with_parent(launcher)) as proc:
        previous = _forward_signals(proc)
        try:
            code = _wait(proc) if watch is None else watch.follow(proc)
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
    return 128 - code if code < 0 else code  # killed by signal s: 128 + s


def die_with_parent(parent, signum=signal.SIGTERM):
    """Ask Linux to send `signum` to this process when its parent dies (in the child,
    before exec): a launcher killed by SIGKILL cannot forward anything itself."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, int(signum), 0, 0, 0)
    except (OSError, AttributeError):   # not Linux: signal forwarding still applies
        return
    if os.getppid() != parent:   # the launcher died before prctl: nobody would signal us
        os.kill(os.getpid(), signum)


def _forward_signals(proc):
    """Forward FORWARDED_SIGNALS to proc; return {signal: previous handler}."""
    def forward(signum, _frame):
        if signum != signal.SIGINT or not in_terminal_foreground():
            proc.send_signal(signum)

    previous = {}
    for signum in FORWARDED_SIGNALS:
        try:
            previous[signum] = signal.signal(signum, forward)
        except ValueError:  # not in the main thread
            break
    return previous


def _wait(proc):
    """Wait for proc; a Ctrl-C is forwarded by the handler and we keep waiting."""
    while True:
        try:
            return proc.wait()
        except KeyboardInterrupt:
            continue


def warn_oversubscription(n, launcher, threads, env=None):
    """Warn on stderr when mpiexec ranks x threads exceed the usable cores."""
    per_node = ranks_per_node(n, launcher, env)
    cores = usable_cores()
    if launcher == "mpiexec" and per_node * threads > cores:
        print(f"nntile_spmd.launch: warning: {per_node} ranks x {threads} threads "
              f"> {cores} usable cores: the node is oversubscribed",
              file=sys.stderr)


def main(argv=None):
    """Launch the script (or print what would run) and return the exit code."""
    args, program = parse_args(sys.argv[1:] if argv is None else argv)
    launcher = choose_launcher(args.launcher)
    threads = args.threads or default_threads(args.n, launcher)
    try:
        command = build_command(launcher, args.n, threads, program, args.launcher_arg)
    except FileNotFoundError as error:
        print(f"nntile_spmd.launch: error: {error}", file=sys.stderr)
        return 127
    if args.dry_run:
        print(format_dry_run(launcher, args.n, threads, command, args.recv_timeout,
                             args.task_threads, args.device))
        return 0
    warn_oversubscription(args.n, launcher, threads)
    sys.stdout.flush()
    env = child_env(threads, recv_timeout=args.recv_timeout, task_threads=args.task_threads,
                    device=args.device)
    done_dir = env[DONE_DIR_VAR] = make_done_dir(launcher)
    watch = RankWatch(done_dir, args.n, end_deadline(env))
    try:
        code = run(command, env, watch)
        return check_every_rank_done(code, done_dir, args.n, launcher, watch)
    finally:
        shutil.rmtree(done_dir, ignore_errors=True)


def end_deadline(env) -> float:
    """Seconds the other ranks get to end once one rank's script has returned: the
    ranks' own deadline (runtime/end_guard.py names the late rank then), plus a margin
    so that their message comes first."""
    try:
        seconds = float(env.get(RECV_TIMEOUT_VAR, DEFAULT_RECV_TIMEOUT_S))
    except ValueError:
        seconds = DEFAULT_RECV_TIMEOUT_S
    return seconds + END_DEADLINE_MARGIN_S


def make_done_dir(launcher, env=None):
    """A fresh directory for the ranks' completion markers (rank_entry.py): under
    $NNTILE_SPMD_DONE_DIR, else /tmp, else, under srun on several nodes (each with its
    own /tmp), the current directory, which Slurm clusters share."""
    env = os.environ if env is None else env
    parent = env.get(DONE_DIR_VAR) or None
    if parent is None and launcher == "srun" and (_positive_int(env.get("SLURM_NNODES"))
                                                  or 1) > 1:
        parent = os.getcwd()
    return tempfile.mkdtemp(prefix=".nntile-launch-", dir=parent)


def print_rank_pids(watch, n, launcher):
    """After a failure: which rank had which pid (mpiexec names a rank by a pid: that of
    the rank's supervisor, rank_entry.py)."""
    pids = []
    for rank in range(n):
        ids = watch.pids(rank)
        if ids is None:
            pids.append(f"rank {rank} = never started")
        else:
            pids.append(f"rank {rank} = pid {ids[0]}"
                        + (f" (mpiexec's pid {ids[2]})" if ids[2] else ""))
    print(f"nntile_spmd.launch: {launcher} failed; the ranks' pids: {', '.join(pids)}",
          file=sys.stderr)


def check_every_rank_done(code, done_dir, n, launcher, watch):
    """The exit code to report: `code`, or 1 when the launcher says success but some
    rank's interpreter did not end normally (mpiexec counts os._exit(0) as success).
    After a failure, the ranks the watch saw end first or miss the deadline are named."""
    missing = [rank for rank in range(n) if not os.path.exists(marker_path(done_dir, rank))]
    for line in watch.report() if code != 0 or missing else ():
        print(f"nntile_spmd.launch: error: {line}", file=sys.stderr)
    if code != 0:
        print_rank_pids(watch, n, launcher)
    if code != 0 or not missing:
        return code
    ranks = ("rank " if len(missing) == 1 else "ranks ") + ", ".join(map(str, missing))
    print(f"nntile_spmd.launch: error: {ranks} of {n} did not finish the program: the "
          f"interpreter did not end normally (os._exit, a crash, or a signal), although "
          f"{launcher} reported success. If the ranks run on several nodes, set "
          f"{DONE_DIR_VAR} to a folder they all share.", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
