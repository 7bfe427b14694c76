"""Offload arenas leave nothing on disk however a rank ends: a normal exit, an abort,
SIGTERM (cleaned by the rank), SIGKILL (cleaned by the next run on the host).
Plain pytest; the abnormal ends run in a child process."""

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from nntile_spmd.runtime import offload_files

REPO = Path(__file__).resolve().parents[2]
# the child makes one arena under argv[1], prints its folder, waits for a line on its
# stdin (the test has seen the folder), then ends as argv[2] says
CHILD = textwrap.dedent("""
    import sys
    import numpy as np
    from nntile_spmd.plan.memory import TileMeta
    from nntile_spmd.runtime.failure import install_abort_on_error
    from nntile_spmd.runtime.offload_store import OffloadStore
    install_abort_on_error(rank=0, size=2)      # as a rank of a 2-rank job would
    store = OffloadStore(np, lambda dtype: np.float64, 0, set())
    store.slot("w", TileMeta((4,), "fp64", 4, 32))[...] = 1.0
    print(store.directory, flush=True)
    sys.stdin.readline()                         # a signal ends it here
    if sys.argv[2] == "raise":
        raise RuntimeError("a failing rank")     # the abort hook: MPI_Abort, no atexit
    """)


def start_child(tmp_path, how):
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("PMI_", "PMIX_", "HYDRA_", "OMPI_", "SLURM_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    env["NNTILE_SPMD_OFFLOAD_DIR"] = str(tmp_path)
    env["NNTILE_SPMD_FLIGHT_DIR"] = str(tmp_path / "flight")
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path), how], env=env,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    directory = Path(child.stdout.readline().strip())   # the arena exists from here on
    assert directory.parent == tmp_path and any(directory.iterdir()), child.stderr.read()
    return child, directory


def go_on(child):
    """Let the child past its wait, to end as it was told."""
    child.stdin.write("go\n")
    child.stdin.flush()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["TERM", "HUP"])
def test_a_rank_stopped_by_a_signal_removes_its_arenas(tmp_path, signum):
    child, directory = start_child(tmp_path, "sleep")
    child.send_signal(signum)
    assert child.wait(timeout=30) == -signum     # still ends by that signal
    assert not directory.exists()


@pytest.mark.timeout(60)
def test_a_rank_that_aborts_removes_its_arenas(tmp_path):
    child, directory = start_child(tmp_path, "raise")
    go_on(child)
    assert child.wait(timeout=30) != 0
    assert "a failing rank" in child.stderr.read()
    assert not directory.exists()
    from nntile_spmd.flight import diagnose, load      # the abort wrote its flight record
    assert "rank 0: RuntimeError: a failing rank, during no compiled graph yet" in \
        diagnose(load(tmp_path / "flight"))


@pytest.mark.timeout(60)
def test_arenas_of_a_killed_rank_are_removed_at_the_next_start(tmp_path):
    child, directory = start_child(tmp_path, "sleep")
    child.kill()                                  # SIGKILL: nothing runs in the child
    child.wait(timeout=30)
    assert directory.exists()
    alive = tmp_path / f"nntile-offload-rank1-{offload_files.host_name()}-pid{os.getpid()}-x"
    elsewhere = tmp_path / f"nntile-offload-rank1-otherhost-pid{child.pid}-x"
    for kept in (alive, elsewhere):
        kept.mkdir()
    fresh = offload_files.make_directory(0, str(tmp_path))
    assert not directory.exists()                 # its process is gone: removed
    assert alive.exists() and elsewhere.exists()  # a live process's; another host's
    offload_files.remove(fresh)
    assert not Path(fresh).exists()
