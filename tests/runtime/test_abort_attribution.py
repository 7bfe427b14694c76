"""An abort names the rank that died, not the peer whose MPI call failed first.

SIGKILL of rank 3 of 4 was reported as "[rank 2] uncaught exception ...
process_vm_readv failed" (MPICH reading the dead rank's memory). Single process: the
world's (host, pid) table is set by hand, a dead peer is a child process that exited
and was not reaped yet (a zombie, as a killed rank is until mpiexec reaps it).
"""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mpi4py import MPI

from nntile_spmd.runtime import failure


@pytest.fixture
def zombie():
    """The pid of a process that has exited, not yet reaped."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    stat = Path(f"/proc/{child.pid}/stat")
    deadline = time.monotonic() + 30
    while stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] != "Z":
        assert time.monotonic() < deadline, "the child did not exit"
        time.sleep(0.01)
    yield child.pid
    child.wait()


def test_the_dead_rank_is_named_first(monkeypatch, zombie):
    host = failure.this_host()
    monkeypatch.setattr(failure, "PEERS", {0: (host, os.getppid()), 1: (host, os.getpid()),
                                           2: (host, os.getpid()), 3: (host, zombie)})
    header = failure.abort_header(2, MPI.Exception(MPI.ERR_OTHER))
    assert header.startswith(f"[rank 2] rank 3 (pid {zombie} on {host}) has died: the "
                             "error it caused on rank 2 ends the job")
    assert "uncaught exception" not in header


def test_an_mpi_error_without_a_dead_local_rank_lists_the_pids(monkeypatch):
    monkeypatch.setattr(failure, "PEERS", {0: ("elsewhere", 1234), 1: ("here", os.getpid())})
    header = failure.abort_header(1, MPI.Exception(MPI.ERR_OTHER))
    assert header.startswith("[rank 1] uncaught exception, aborting the job")
    assert "rank 0 = pid 1234 on elsewhere" in header
    plain = failure.abort_header(1, ValueError("a user's mistake"))
    assert plain == "[rank 1] uncaught exception, aborting the job:\n"
