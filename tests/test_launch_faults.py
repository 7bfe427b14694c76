"""Faults at the end of a job and ranks that leave early are named, under the launcher
and plain mpiexec (plain pytest: each test starts a 2-4 rank job in a subprocess).

A rank stopped or hung after its last library call, or gone by os._exit(0), used to
hang the job or end it with status 0; a killed rank was reported by mpiexec with
another rank's pid; SIGHUP was swallowed by UCX. The deadline is 3 s, so each job
ends within seconds; a stopped or hung rank is always SIGKILLed by the test itself.
A rank killed or gone by os._exit while the others still run is named by the launcher
only (under plain mpiexec the others are killed before they can tell).
"""

import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from mpi4py import MPI

REPO = Path(__file__).resolve().parents[1]
MPIEXEC = shutil.which("mpiexec", path=str(Path(sys.executable).parent)) or shutil.which("mpiexec")
FOREIGN = ("PMI_", "PMIX_", "HYDRA_", "MPIR_", "OMPI_", "SLURM_")   # of an enclosing job
DEADLINE_S = 3.0
HOST = socket.gethostname()

pytestmark = [
    pytest.mark.skipif(MPI.COMM_WORLD.size > 1, reason="single-process tier (spawns jobs)"),
    pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec"),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc"),
    pytest.mark.slow,
    pytest.mark.timeout(90),
]

# The first compile over COMM_WORLD makes an MPIWorld, which arms the guarded end and
# the watch of the peers; made directly here, the job starts in 3 s instead of 8.
JOB = """
import os, signal, sys, time
from pathlib import Path
from mpi4py import MPI
from nntile_spmd.runtime import abnormal_end
from nntile_spmd.runtime.mpi_world import MPIWorld

FAULTS = dict(arg.split("=") for arg in sys.argv[1:])     # rank=fault
world = MPIWorld()
rank = world.rank
Path(f"rank{rank}.pid").write_text(str(os.getpid()))
abnormal_end.register("test", lambda: Path(f"rank{rank}.cleaned").write_text(""))
fault = FAULTS.get(str(rank))
if fault == "sighup":
    os.kill(os.getpid(), signal.SIGHUP)
    time.sleep(10)
    print(f"rank {rank} survived SIGHUP", flush=True)
world.barrier("the last call")
if fault == "stop":
    os.kill(os.getpid(), signal.SIGSTOP)
elif fault == "hang":
    time.sleep(600)
elif fault == "exit":
    os._exit(0)
elif fault == "kill":
    os.kill(os.getpid(), signal.SIGKILL)
elif fault == "busy":
    time.sleep(600)       # still running its program when another rank is killed
print(f"rank {rank} finished", flush=True)
"""


def clean_env():
    env = {key: value for key, value in os.environ.items() if not key.startswith(FOREIGN)}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
    env["NNTILE_SPMD_RECV_TIMEOUT"] = str(DEADLINE_S)
    return env


def run_job(tmp_path, runner, ranks, *faults, script=JOB, limit=60):
    """(exit code, output, seconds) of `script` on `ranks` ranks under `runner`
    ("mpiexec" or "launch"); every rank the script recorded is SIGKILLed afterwards."""
    path = tmp_path / "job.py"
    path.write_text(textwrap.dedent(script))
    program = [str(path), *faults]
    command = ([MPIEXEC, "-n", str(ranks), sys.executable, *program] if runner == "mpiexec"
               else [sys.executable, "-m", "nntile_spmd.launch", "-n", str(ranks), *program])
    start = time.perf_counter()
    job = subprocess.Popen(command, env=clean_env(), cwd=tmp_path, text=True,
                           start_new_session=True, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT)
    try:
        output, _ = job.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        os.killpg(job.pid, signal.SIGKILL)
        output, _ = job.communicate()
        pytest.fail(f"the job hung for {limit} s:\n{output}")
    finally:
        kill_ranks(tmp_path)
    return job.returncode, output, time.perf_counter() - start


def kill_ranks(tmp_path):
    """Never leave a stopped or hung rank behind (the abort normally killed it)."""
    for pid_file in tmp_path.glob("rank*.pid"):
        for signum in (signal.SIGKILL, signal.SIGCONT):
            try:
                os.kill(int(pid_file.read_text()), signum)
            except (ProcessLookupError, ValueError):
                break


def pid_of(tmp_path, rank) -> str:
    return (tmp_path / f"rank{rank}.pid").read_text()


RUNNERS = pytest.mark.parametrize("runner", ["mpiexec", "launch"])


@RUNNERS
def test_ranks_stopped_or_hung_after_the_last_call_are_named_at_the_deadline(tmp_path,
                                                                               runner):
    code, output, seconds = run_job(tmp_path, runner, 3, "1=stop", "2=hang")
    assert code != 0 and "rank 0 finished" in output, output    # its program did
    assert ("[rank 0] the job cannot end: rank(s) [1] are stopped (SIGSTOP); rank(s) [2] "
            "never reached the end") in output, output
    assert seconds < DEADLINE_S + 25, f"{seconds:.1f} s"   # starting 3 ranks: most of it


def test_the_launcher_names_a_rank_gone_by_os_exit_after_the_last_call(tmp_path):
    """Under plain mpiexec the others are killed within a millisecond of the exit and
    mpiexec may report status 0: docs/reliability.md says so (only the launcher's
    supervisors see it first)."""
    code, output, _ = run_job(tmp_path, "launch", 3, "2=exit")
    assert code != 0, output
    assert (f"nntile_spmd.launch: error: rank 2 (pid {pid_of(tmp_path, 2)} on {HOST}) "
            "exited with status 0 without finishing its program") in output, output


def test_the_launcher_names_a_killed_rank_other_than_zero(tmp_path):
    """mpiexec kills the other ranks at once and names a pid it saw end; the launcher
    names the killed rank (the supervisor of each rank records how it ended)."""
    code, output, _ = run_job(tmp_path, "launch", 4, "0=busy", "1=busy", "2=kill", "3=busy")
    assert code != 0, output
    assert (f"nntile_spmd.launch: error: rank 2 (pid {pid_of(tmp_path, 2)} on {HOST}) was "
            "killed by signal 9 (SIGKILL), before the job ended: the first rank to end"
            ) in output, output
    assert "rank 0 finished" not in output


@RUNNERS
def test_sighup_ends_the_rank_with_its_clean_up(tmp_path, runner):
    code, output, seconds = run_job(tmp_path, runner, 2, "1=sighup")
    assert code != 0 and "survived SIGHUP" not in output, output
    assert (tmp_path / "rank1.cleaned").exists(), output        # abnormal_end ran
    assert "UCX  DEBUG" not in output, output[:2000]
    if runner == "launch":    # mpiexec names the pid (its kills of the others follow)
        assert (f"rank 1 (pid {pid_of(tmp_path, 1)} on {HOST}) was killed by signal 1 "
                "(SIGHUP)") in output, output


MPI_ONLY = """
import os, signal
from pathlib import Path
from mpi4py import MPI

rank = MPI.COMM_WORLD.rank
Path(f"rank{rank}.pid").write_text(str(os.getpid()))
MPI.COMM_WORLD.Barrier()
if rank == 1:
    os.kill(os.getpid(), signal.SIGSTOP)
"""


def test_the_launcher_ends_a_job_whose_rank_stopped_without_the_library(tmp_path):
    """No library, no guarded end: the launcher's own deadline, counted from the first
    rank whose script returned, names the stopped rank."""
    code, output, seconds = run_job(tmp_path, "launch", 2, script=MPI_ONLY)
    assert code != 0, output
    assert (f"rank 1 (pid {pid_of(tmp_path, 1)} on {HOST}): stopped: did not reach the end "
            "of the program within") in output, output
