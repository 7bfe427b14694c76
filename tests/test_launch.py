"""Tests of the launcher (python -m nntile_spmd.launch); plain pytest, no MPI needed."""

import os
import re
import shlex
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from nntile_spmd import launch

REPO = Path(__file__).resolve().parents[1]
# Variables of an enclosing MPI job or Slurm allocation must not leak into the
# launcher under test (the test suite itself may run under mpiexec or srun).
_FOREIGN_PREFIXES = ("PMI_", "PMIX_", "HYDRA_", "MPIR_", "OMPI_", "SLURM_")


def clean_env(**extra):
    """Return os.environ without MPI/Slurm/thread variables, plus extra."""
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(_FOREIGN_PREFIXES)
           and key not in launch.THREAD_ENV_VARS}
    env["PYTHONPATH"] = os.pathsep.join(
        [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])
    env.update(extra)
    return env


@pytest.fixture
def no_slurm(monkeypatch):
    """Run the in-process launcher outside of any Slurm allocation."""
    for key in list(os.environ):
        if key.startswith(_FOREIGN_PREFIXES) or key in launch.THREAD_ENV_VARS:
            monkeypatch.delenv(key)


@pytest.fixture
def fake_slurm(tmp_path, monkeypatch, no_slurm):
    """Fake a Slurm allocation: SLURM_* variables and an `srun` on PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    srun = bin_dir / "srun"
    srun.write_text(textwrap.dedent("""\
        #!/bin/sh
        echo "FAKE-SRUN $* OMP=$OMP_NUM_THREADS NNTILE=$NNTILE_SPMD_THREADS"
        exit "${FAKE_SRUN_EXIT:-0}"
        """))
    srun.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("SLURM_JOB_ID", "12345")
    monkeypatch.setenv("SLURM_NNODES", "2")
    return srun


def dry_run(capsys, *argv):
    """Run the launcher in-process with --dry-run; return (summary, argv printed)."""
    assert launch.main(["--dry-run", *argv]) == 0
    summary, command = capsys.readouterr().out.strip().splitlines()
    return summary, shlex.split(command)


def split_env(words):
    """Split `env K=V ... cmd` into ({K: V}, cmd)."""
    n = len(launch.THREAD_ENV_VARS)
    assert words[0] == "env"
    return dict(word.split("=", 1) for word in words[1:1 + n]), words[1 + n:]


needs_mpiexec = pytest.mark.skipif(launch.find_mpiexec() is None,
                                   reason="no mpiexec available")


@needs_mpiexec
def test_dry_run_mpiexec(capsys, no_slurm, monkeypatch):
    monkeypatch.setattr(launch, "usable_cores", lambda: 8)
    summary, words = dry_run(capsys, "-n", "2", "train.py", "--strategy", "fsdp", "-n", "7")
    env, command = split_env(words)
    assert "launcher: mpiexec" in summary
    assert env == {name: "4" for name in launch.THREAD_ENV_VARS}
    mpiexec = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    if os.path.exists(mpiexec):  # the mpich wheel's, next to the interpreter
        assert command[0] == mpiexec
    assert os.path.basename(command[0]) == "mpiexec"
    assert command[1:] == ["-n", "2", sys.executable, launch.RANK_ENTRY, "train.py",
                           "--strategy", "fsdp", "-n", "7"]


@needs_mpiexec
def test_dry_run_never_oversubscribes(capsys, no_slurm, monkeypatch):
    monkeypatch.setattr(launch, "usable_cores", lambda: 2)
    env, _ = split_env(dry_run(capsys, "-n", "5", "x.py")[1])
    assert env["NNTILE_SPMD_THREADS"] == "1"


@needs_mpiexec
def test_dry_run_explicit_threads_and_launcher_args(capsys, no_slurm):
    env, command = split_env(dry_run(
        capsys, "-n", "3", "--threads", "6", "--launcher", "mpiexec",
        "--launcher-arg=--oversubscribe", "--", "x.py", "--", "a")[1])
    assert env["OMP_NUM_THREADS"] == env["MKL_NUM_THREADS"] == "6"
    assert command[1:] == ["-n", "3", "--oversubscribe", sys.executable,
                           launch.RANK_ENTRY, "x.py", "--", "a"]


@needs_mpiexec
def test_dry_run_env_override(capsys, no_slurm, monkeypatch):
    monkeypatch.setenv("NNTILE_SPMD_THREADS", "3")
    env, _ = split_env(dry_run(capsys, "-n", "2", "x.py")[1])
    assert set(env.values()) == {"3"}


def test_dry_run_slurm(capsys, fake_slurm, monkeypatch):
    monkeypatch.setattr(launch, "usable_cores", lambda: 16)
    summary, words = dry_run(capsys, "-n", "8", "train.py", "--strategy", "fsdp")
    env, command = split_env(words)
    assert "launcher: srun" in summary
    # 8 ranks over SLURM_NNODES=2 nodes: 4 ranks per node, 16 cores -> 4 threads
    assert env == {name: "4" for name in launch.THREAD_ENV_VARS}
    assert command == [str(fake_slurm), "-n", "8", "--cpu-bind=cores",
                       "--cpus-per-task=4", sys.executable, launch.RANK_ENTRY, "train.py",
                       "--strategy", "fsdp"]


def test_dry_run_slurm_cpus_per_task(capsys, fake_slurm, monkeypatch):
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "7")
    env, command = split_env(dry_run(capsys, "-n", "2", "x.py")[1])
    assert env["NNTILE_SPMD_THREADS"] == "7"
    assert "--cpus-per-task=7" in command


@needs_mpiexec
def test_slurm_forced_mpiexec(capsys, fake_slurm):
    summary, words = dry_run(capsys, "-n", "2", "--launcher", "mpiexec", "x.py")
    assert "launcher: mpiexec" in summary
    assert os.path.basename(split_env(words)[1][0]) == "mpiexec"


def test_job_id_without_srun_uses_mpiexec(no_slurm, monkeypatch, tmp_path):
    monkeypatch.setenv("SLURM_JOB_ID", "1")
    monkeypatch.setenv("PATH", str(tmp_path))
    assert launch.choose_launcher("auto") == "mpiexec"


def test_srun_on_path_without_job_uses_mpiexec(fake_slurm, monkeypatch):
    monkeypatch.delenv("SLURM_JOB_ID")
    assert launch.choose_launcher("auto") == "mpiexec"


def test_fake_srun_runs_with_thread_env(fake_slurm, tmp_path):
    env = dict(os.environ, PYTHONPATH=clean_env()["PYTHONPATH"], FAKE_SRUN_EXIT="5")
    result = subprocess.run(
        [sys.executable, "-m", "nntile_spmd.launch", "-n", "2", "--threads", "3", "x.py",
         "arg"], env=env, check=False, capture_output=True, text=True, timeout=60)
    assert result.returncode == 5
    assert "FAKE-SRUN -n 2 --cpu-bind=cores --cpus-per-task=3" in result.stdout
    assert "x.py arg OMP=3 NNTILE=3" in result.stdout


@pytest.mark.parametrize("argv", [["-n", "2"], ["x.py"], ["-n", "0", "x.py"],
                                  ["-n", "2", "--threads", "0", "x.py"],
                                  ["-n", "2", "--launcher", "qsub", "x.py"]])
def test_bad_arguments(argv, capsys):
    with pytest.raises(SystemExit) as error:
        launch.main(argv)
    assert error.value.code == 2


def test_split_argv():
    assert launch.split_argv(["-n", "2", "--dry-run", "s.py", "-n", "3"]) == (
        ["-n", "2", "--dry-run"], ["s.py", "-n", "3"])
    assert launch.split_argv(["-n2", "--threads=4", "s.py"]) == (
        ["-n2", "--threads=4"], ["s.py"])
    assert launch.split_argv(["-n", "2", "--", "-s.py", "--"]) == (
        ["-n", "2"], ["-s.py", "--"])


def test_child_env_sets_all_thread_vars():
    env = launch.child_env(5, {"PATH": "/bin", "OMP_NUM_THREADS": "64"})
    assert env["PATH"] == "/bin"
    assert all(env[name] == "5" for name in launch.THREAD_ENV_VARS)


RANK_SCRIPT = """\
import os
import sys
from mpi4py import MPI

comm = MPI.COMM_WORLD
print(f"rank {comm.Get_rank()} of {comm.Get_size()} "
      f"threads={os.environ.get('NNTILE_SPMD_THREADS')}", flush=True)
sys.exit(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
"""


@pytest.fixture
def rank_script(tmp_path):
    """Write the script that every rank runs; return its path."""
    script = tmp_path / "ranks.py"
    script.write_text(RANK_SCRIPT)
    return script


def launch_ranks(*argv, **env):
    """Run `python -m nntile_spmd.launch *argv` in a clean environment (plus `env`)."""
    return subprocess.run([sys.executable, "-m", "nntile_spmd.launch", *argv],
                          env=clean_env(**env), check=False, capture_output=True, text=True,
                          timeout=180)


@needs_mpiexec
def test_runs_two_ranks(rank_script):
    result = launch_ranks("-n", "2", str(rank_script))
    assert result.returncode == 0, result.stderr
    threads = max(1, launch.usable_cores() // 2)
    for rank in (0, 1):
        assert f"rank {rank} of 2 threads={threads}" in result.stdout


@needs_mpiexec
def test_child_failure_is_reported(rank_script):
    result = launch_ranks("-n", "2", str(rank_script), "3")
    assert result.returncode != 0


EXIT_SCRIPT = """\
import os
import sys
from mpi4py import MPI

comm = MPI.COMM_WORLD
comm.Barrier()
if comm.Get_rank() == 1:
    os._exit(0)      # skips the interpreter's shutdown: mpiexec still reports success
"""


@needs_mpiexec
def test_a_rank_that_leaves_by_os_exit_is_named(tmp_path):
    script = tmp_path / "leaves.py"
    script.write_text(EXIT_SCRIPT)
    markers = tmp_path / "markers"
    markers.mkdir()
    result = launch_ranks("-n", "2", str(script), NNTILE_SPMD_DONE_DIR=str(markers))
    assert result.returncode != 0, result.stderr   # 1, or mpiexec's when it killed rank 0
    assert re.search(r"rank 1 \(pid \d+ on .*\) exited with status 0 without finishing its "
                     "program", result.stderr), result.stderr
    assert not list(markers.iterdir())          # the launcher removed its markers


KILLED_SCRIPT = """\
import os
import signal
from mpi4py import MPI

MPI.COMM_WORLD.Barrier()
if MPI.COMM_WORLD.Get_rank() == 1:
    os.kill(os.getpid(), signal.SIGKILL)
MPI.COMM_WORLD.Barrier()
"""


@needs_mpiexec
def test_a_killed_rank_is_named_by_its_pid(tmp_path):
    """mpiexec names a killed rank only by a pid (that of the rank's supervisor): the
    launcher names the rank and says whose each pid is."""
    script = tmp_path / "killed.py"
    script.write_text(KILLED_SCRIPT)
    result = launch_ranks("-n", "2", str(script))
    assert result.returncode != 0
    pids = re.search(r"the ranks' pids: rank 0 = pid (\d+) \(mpiexec's pid (\d+)\), "
                     r"rank 1 = pid (\d+) \(mpiexec's pid (\d+)\)", result.stderr)
    assert pids, result.stdout + result.stderr
    assert (f"rank 1 (pid {pids[3]} on {socket.gethostname()}) was killed by signal 9 "
            "(SIGKILL), before the job ended: the first rank to end") in result.stderr
    output = result.stdout + result.stderr
    if "BAD TERMINATION" in output:                  # MPICH's hydra: its words
        assert re.search(rf"PID ({pids[2]}|{pids[4]}) RUNNING", output), output


@needs_mpiexec
def test_the_script_runs_as_python_would_run_it(tmp_path):
    """Under rank_entry the script is __main__, sees its own argv and imports its
    neighbours (its folder is first on sys.path)."""
    (tmp_path / "neighbour.py").write_text("VALUE = 7\n")
    script = tmp_path / "main.py"
    script.write_text("import sys, neighbour\n"
                      "assert __name__ == '__main__', __name__\n"
                      "print('argv', sys.argv, neighbour.VALUE)\n")
    result = launch_ranks("-n", "1", str(script), "a", "b")
    assert result.returncode == 0, result.stderr
    assert f"argv {[str(script), 'a', 'b']} 7" in result.stdout


def test_run_script_wraps_launcher(no_slurm, tmp_path):
    env = clean_env(PATH=os.pathsep.join([os.path.dirname(sys.executable),
                                          os.environ.get("PATH", "")]))
    del env["PYTHONPATH"]  # launch/run puts the repository root there itself
    result = subprocess.run([str(REPO / "launch" / "run"), "-n", "1", "--threads", "2",
                             "--dry-run", "x.py"], cwd=tmp_path, env=env,
                            check=False, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "NNTILE_SPMD_THREADS=2" in result.stdout
    assert result.stdout.rstrip().endswith("x.py")


def test_task_threads_exported_to_the_ranks():
    env = launch.child_env(2, {"PATH": "/bin"}, task_threads=1)
    assert env["NNTILE_SPMD_TASK_THREADS"] == "1" and env["NNTILE_SPMD_THREADS"] == "2"
    assert "NNTILE_SPMD_TASK_THREADS" not in launch.child_env(2, {"PATH": "/bin"})


@needs_mpiexec
def test_dry_run_task_threads(capsys, no_slurm):
    words = dry_run(capsys, "-n", "1", "--threads", "2", "--task-threads", "1", "x.py")[1]
    assert "NNTILE_SPMD_TASK_THREADS=1" in words
    with pytest.raises(SystemExit):
        launch.main(["--dry-run", "-n", "1", "--task-threads", "0", "x.py"])


@needs_mpiexec
def test_device_is_exported_to_the_ranks(capsys, no_slurm):
    """--device cuda: the ranks' device="auto" means cuda (NNTILE_SPMD_DEVICE)."""
    _, words = dry_run(capsys, "-n", "2", "--device", "cuda", "x.py", "--device", "cpu")
    assert f"{launch.DEVICE_VAR}=cuda" in words
    assert words[-3:] == ["x.py", "--device", "cpu"]     # the script's own option stays
    assert launch.child_env(2, {}, device="cpu")[launch.DEVICE_VAR] == "cpu"
    assert launch.DEVICE_VAR not in launch.child_env(2, {})


def test_an_unknown_device_is_refused(capsys):
    with pytest.raises(SystemExit):
        launch.main(["--dry-run", "-n", "2", "--device", "gpu", "x.py"])
    assert "invalid choice: 'gpu'" in capsys.readouterr().err
