"""Killing the launcher leaves no mpiexec and no rank behind (plain pytest, spawns
`python -m nntile_spmd.launch -n 2` in a subprocess)."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_launch import clean_env, needs_mpiexec

SCRIPT = """
import os, sys, time
from pathlib import Path
pid_file = Path(sys.argv[1], f"rank{os.environ['PMI_RANK']}.pid")
Path(f"{pid_file}.part").write_text(str(os.getpid()))
os.replace(f"{pid_file}.part", pid_file)     # the test never reads a half-written file
time.sleep(120)
"""


def alive(pid: int) -> bool:
    """Running (a zombie waiting for its reaper counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


def children(pid: int) -> list:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(child) for child in path.read_text().split()] if path.exists() else []


def start_job(tmp_path):
    script = tmp_path / "sleeper.py"
    script.write_text(SCRIPT)
    launcher = subprocess.Popen([sys.executable, "-m", "nntile_spmd.launch", "-n", "2",
                                 str(script), str(tmp_path)], env=clean_env(),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while len(list(tmp_path.glob("rank*.pid"))) < 2:
        assert time.monotonic() < deadline, "the ranks did not start"
        time.sleep(0.05)
    ranks = [int(path.read_text()) for path in tmp_path.glob("rank*.pid")]
    return launcher, children(launcher.pid), ranks


@needs_mpiexec
@pytest.mark.timeout(120)
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL],
                         ids=["SIGTERM", "SIGINT", "SIGKILL"])
def test_killing_the_launcher_ends_mpiexec_and_every_rank(tmp_path, signum):
    launcher, mpiexec, ranks = start_job(tmp_path)
    assert mpiexec, "the launcher started no mpiexec"
    os.kill(launcher.pid, signum)
    launcher.wait(timeout=30)
    deadline = time.monotonic() + 15
    survivors = [pid for pid in mpiexec + ranks if alive(pid)]
    while survivors and time.monotonic() < deadline:
        time.sleep(0.1)
        survivors = [pid for pid in survivors if alive(pid)]
    for pid in survivors:     # leave nothing behind for the next test, then fail
        os.kill(pid, signal.SIGKILL)
    assert not survivors, f"still running after the launcher got {signum!r}: {survivors}"
