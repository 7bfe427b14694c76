"""Fault injection: every case ends with a clear error or the right result, in seconds.

Plain pytest (single process): each case writes a job script, runs it under
`mpiexec -n 2` in a subprocess and injects the fault (SIGKILL or SIGSTOP of one
rank, a skipped execute, mismatched data). The deadline of every library wait is
lowered to 2 s through $NNTILE_SPMD_RECV_TIMEOUT, so a stopped rank must end
the job within the deadline plus the diagnosis' grace period.
"""

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from mpi4py import MPI

REPO = Path(__file__).resolve().parents[2]
MPIEXEC = shutil.which("mpiexec", path=str(Path(sys.executable).parent)) or shutil.which("mpiexec")
FOREIGN = ("PMI_", "PMIX_", "HYDRA_", "MPIR_", "OMPI_", "SLURM_")   # of an enclosing job
DEADLINE_S = 2.0

pytestmark = [
    pytest.mark.skipif(MPI.COMM_WORLD.size > 1, reason="single-process tier (spawns jobs)"),
    pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec"),
    pytest.mark.timeout(90),
]

# Steps of a small job: x on rank 0, y = relu(x) on rank 1, z = relu(y) back on rank 0,
# so every execute moves tiles both ways; a collective get_output follows each step.
JOB = """
import os, sys, time
from pathlib import Path
import numpy as np
import nntile_spmd as nt
from mpi4py import MPI

MODE, STEPS = {mode!r}, {steps}
rank = MPI.COMM_WORLD.rank
Path(f"rank{{rank}}.pid").write_text(str(os.getpid()))
g = nt.LogicalGraph("job")
x = g.tensor([64, 64], "x", dtype="fp64", external=True)
y = nt.ops.relu(x, "y")
nt.ops.relu(y, "z").mark_output()
on = {{r: nt.TileDistribution.on_rank(r) for r in (0, 1)}}
# Each rank runs the graph alone first, so that no rank of the job compiles a kernel
# (seconds on a cold Numba cache) while its peer waits under the 2 s deadline.
alone = nt.compile(g, comm=nt.SimulatedWorld(1))
alone.bind_data("x", np.ones((64, 64)))
alone.execute()
alone.get_output("z")
cg = nt.compile(g, distribution={{"x": on[0], "y": on[1], "z": on[0]}})
other_graph = nt.LogicalGraph("other")
nt.ops.relu(other_graph.tensor([4], "u", dtype="fp64", external=True), "v").mark_output()
other = nt.compile(other_graph)
other.bind_data("u", np.ones(4))
for step in range(STEPS):
    data = np.full((64, 64), float(step))
    if MODE == "mismatched_data" and rank == 1:
        data = data + 1.0
    cg.bind_data("x", data)
    if MODE == "skipped_execute" and rank == 1 and step == 3:
        continue
    if MODE == "divergent" and rank == 1 and step == 3:
        other.execute()                  # rank 0 executes the job's graph meanwhile
    cg.execute()
    z = cg.get_output("z")
    assert np.array_equal(z, np.full((64, 64), float(step))), "wrong result"
    if step == 2:
        Path(f"rank{{rank}}.ready").write_text("")
    if MODE in ("stop", "kill"):
        time.sleep(0.002)
print(f"rank {{rank}} finished", flush=True)
"""


def clean_env():
    env = {key: value for key, value in os.environ.items() if not key.startswith(FOREIGN)}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
    env["NNTILE_SPMD_RECV_TIMEOUT"] = str(DEADLINE_S)
    return env


def start(tmp_path, script_text, ranks=2):
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent(script_text))
    env = clean_env() | {"NNTILE_SPMD_FLIGHT_DIR": str(tmp_path / "flight")}
    return subprocess.Popen([MPIEXEC, "-n", str(ranks), sys.executable, str(script)],
                            env=env, cwd=tmp_path, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def finish(job, limit=60):
    """(return code, output, seconds) of a job, killed if it outlives `limit`."""
    start_time = time.perf_counter()
    try:
        output, _ = job.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        job.kill()
        output, _ = job.communicate()
        pytest.fail(f"the job hung for {limit} s:\n{output}")
    return job.returncode, output, time.perf_counter() - start_time


def wait_ready(tmp_path, job, ranks=2):
    deadline = time.monotonic() + 60
    while len(list(tmp_path.glob("rank*.ready"))) < ranks:
        assert job.poll() is None, job.communicate()[0]
        assert time.monotonic() < deadline, "the job did not get going"
        time.sleep(0.02)
    return int((tmp_path / "rank1.pid").read_text())


def test_healthy_job_finishes(tmp_path):
    code, output, _ = finish(start(tmp_path, JOB.format(mode="none", steps=5)))
    assert code == 0 and output.count("finished") == 2, output


def test_sigkill_of_one_rank_ends_the_job(tmp_path):
    job = start(tmp_path, JOB.format(mode="kill", steps=100000))
    os.kill(wait_ready(tmp_path, job), signal.SIGKILL)
    code, output, seconds = finish(job)
    assert code != 0 and "rank 0 finished" not in output, output
    assert seconds < 10, f"{seconds:.1f} s to end the job"


def test_sigstop_of_one_rank_ends_the_job_naming_it(tmp_path):
    job = start(tmp_path, JOB.format(mode="stop", steps=100000))
    stopped = wait_ready(tmp_path, job)
    os.kill(stopped, signal.SIGSTOP)
    try:
        code, output, seconds = finish(job)
    finally:
        with_pid_gone(stopped)
    assert code != 0 and "rank 0 finished" not in output, output
    assert "rank(s) [1] did not respond" in output and "of graph 'job'" in output, output
    # no diagnosis grace: a stopped rank of this host is known silent (it took 2 s more)
    assert seconds < DEADLINE_S + 5, f"{seconds:.1f} s to end the job"
    merged = flight_report(tmp_path)                 # the flight recorder, on a stopped rank
    assert "rank 0: " in merged and "of graph 'job'" in merged, merged
    assert "no record from rank(s) [1]: stopped or killed" in merged, merged


def flight_report(tmp_path) -> str:
    """What `python -m nntile_spmd.flight DIR` prints for the job's records."""
    from nntile_spmd.flight import diagnose, load
    return "\n".join(diagnose(load(tmp_path / "flight")))


def test_divergent_executes_are_named_by_the_flight_record(tmp_path):
    """Rank 1 executes another graph while rank 0 executes the job's: both time out,
    and the merged records say which call each rank was in."""
    code, output, _ = finish(start(tmp_path, JOB.format(mode="divergent", steps=6)))
    assert code != 0 and "wrong result" not in output, output
    merged = flight_report(tmp_path)
    assert ("first disagreement: the ranks are in different calls (rank 0 in execute #3 of "
            "graph 'job'; rank 1 in execute #0 of graph 'other')") in merged, merged + output


def with_pid_gone(pid):
    """Never leave a stopped rank behind (the abort normally killed it already)."""
    for signum in (signal.SIGKILL, signal.SIGCONT):
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            return


def test_skipped_execute_raises_instead_of_taking_another_steps_tiles(tmp_path):
    code, output, seconds = finish(start(tmp_path, JOB.format(mode="skipped_execute",
                                                               steps=6)))
    assert code != 0 and "wrong result" not in output, output
    assert "the ranks diverged" in output and "['x']" in output, output
    assert seconds < 20, f"{seconds:.1f} s"


def test_mismatched_replicated_data_raises(tmp_path):
    code, output, _ = finish(start(tmp_path, JOB.format(mode="mismatched_data", steps=2)))
    assert code != 0, output
    assert "rank 1 bound different data than rank 0 for ['x']" in output, output


# -- checkpoints: a killed 2-rank run resumes on 3 simulated ranks under another preset -----
EXAMPLES = REPO / "examples"
TRAIN = ["--dtype", "fp64", "--target", "0", "--hidden", "32", "--tile-bytes", "4096"]
NEVER_ENDS = ["--steps", "100000"]     # a job the test stops or kills, never one that finishes


def train(ranks, *options, cwd):
    return subprocess.Popen([MPIEXEC, "-n", str(ranks), sys.executable,
                             str(EXAMPLES / "train_mlp.py"), *TRAIN, *options],
                            env=clean_env(), cwd=cwd, text=True, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def wait_for_checkpoint(job, root, step):
    """Wait until the job's checkpoint of `step` is complete (the event the test acts on)."""
    deadline = time.monotonic() + 60
    while not (root / f"step-{step:08d}" / "manifest.json").exists():
        assert job.poll() is None, job.communicate()[0]
        assert time.monotonic() < deadline, f"no checkpoint of step {step} appeared"
        time.sleep(0.01)


def train_here(strategy, ranks, steps, *options):
    """The summary of train_mlp.py on `ranks` simulated ranks in this process: the same
    plans, kernels and checkpoint files as on MPI ranks, without starting a job (real
    ranks reading each other's shards: tests/train/test_mpi.py)."""
    if str(EXAMPLES) not in sys.path:
        sys.path.insert(0, str(EXAMPLES))
    import train_mlp
    return train_mlp.run(train_mlp.parse_args([*TRAIN, "--strategy", strategy, "--simulate",
                                               str(ranks), "--steps", str(steps), *options]))


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_killed_run_resumes_on_more_ranks_with_the_uninterrupted_loss(tmp_path):
    from nntile_spmd.train import complete_checkpoints
    root = tmp_path / "ckpt"
    job = train(2, "--strategy", "fsdp", *NEVER_ENDS, "--checkpoint-dir", str(root),
                "--checkpoint-every", "5", "--keep-last", "2", cwd=tmp_path)
    wait_for_checkpoint(job, root, 10)
    os.killpg(job.pid, signal.SIGKILL)       # mpiexec and both ranks, mid-training
    job.communicate()
    assert job.returncode == -signal.SIGKILL
    saved = sorted(path.name for path in root.iterdir())
    assert len(saved) <= 3, saved            # pruned to 2 (and a save in progress)
    # on for 5 steps past the newest complete checkpoint, however far the job got
    latest = complete_checkpoints(root)[-1][0]
    resumed = train_here("tp", 3, latest + 5, "--checkpoint-dir", str(root), "--resume")
    assert resumed["resumed_from_step"] == latest >= 10 and resumed["ranks"] == 3, resumed
    # fp64: only the rounding of the first steps' presets differs
    assert resumed["final_loss"] == pytest.approx(
        train_here("tp", 3, latest + 5)["final_loss"], rel=1e-9)


def descendants(pid: int) -> list:
    found, frontier = [], [pid]
    while frontier:
        parent = frontier.pop()
        path = Path(f"/proc/{parent}/task/{parent}/children")
        children = [int(c) for c in path.read_text().split()] if path.exists() else []
        found += children
        frontier += children
    return found


def rank_pid(job_pid: int, rank: int) -> int:
    """The pid of MPI rank `rank` among the job's processes (from their environment)."""
    for pid in descendants(job_pid):
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"PMI_RANK={rank}".encode() in environ:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            if b"train_mlp.py" in cmdline and b"mpiexec" not in cmdline.split(b"\0")[0]:
                return pid
    raise AssertionError(f"no rank {rank} under pid {job_pid}")


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_stopped_rank_in_training_is_named_with_the_step(tmp_path):
    root = tmp_path / "ckpt"
    job = train(2, "--strategy", "ddp", *NEVER_ENDS, "--checkpoint-dir", str(root),
                "--checkpoint-every", "5", "--keep-last", "1", cwd=tmp_path)
    wait_for_checkpoint(job, root, 5)
    stopped = rank_pid(job.pid, 1)
    os.kill(stopped, signal.SIGSTOP)
    try:
        code, output, seconds = finish(job)
    finally:
        with_pid_gone(stopped)
    assert code != 0, output
    assert "rank(s) [1] did not respond" in output and "(training step " in output, output
    assert seconds < DEADLINE_S + 10 + 5, f"{seconds:.1f} s to end the job"
