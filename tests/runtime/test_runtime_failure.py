"""A rank that raises stops the whole MPI job promptly, printing its traceback once.

Plain pytest: each case writes a small script and runs it under
`mpiexec -n 2` in a subprocess (the suite itself must not be the job that dies).
Rank 1 raises while rank 0 is blocked (in compile's collective, or waiting for a
tile in execute); the job must exit non-zero well before any receive timeout.
"""

import os
import shutil
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
MESSAGE = "rank one fails on purpose"

SCRIPT = """
import numpy as np
import nntile_spmd as nt
from mpi4py import MPI

FAIL_AT = {fail_at!r}
rank = MPI.COMM_WORLD.rank
if FAIL_AT == "before_compile" and rank == 1:
    raise RuntimeError("{message}")          # rank 0 is about to block in compile
g = nt.LogicalGraph("job")
a = g.tensor([4, 6], "A", dtype="fp64", external=True)
b = g.tensor([6, 4], "B", dtype="fp64", external=True)
nt.ops.gemm(a, b, "C").mark_output()
step = g.tensor([], "step", dtype="int64", persistent=True)
p, grad, m, v = (g.tensor([3], name, dtype="fp64", persistent=True) for name in "pgmv")
nt.ops.adam_step(step, grad, p, m, v)        # on rank 1; raises at step 0 (1 - beta1**0)
nt.ops.gelu(p, "q").mark_output()            # on rank 0: waits for rank 1's updated p
on = {{r: nt.TileDistribution.on_rank(r) for r in (0, 1)}}
distribution = dict.fromkeys(["A", "C", "q"], on[0]) | dict.fromkeys(["B", "step", *"pgmv"], on[1])
cg = nt.compile(g, tiling=nt.TilingStrategy.manual({{"B": [3, 4]}}), distribution=distribution)
cg.bind_data("A", np.ones((4, 6)))
cg.bind_data("B", np.ones((6, 4)))
if FAIL_AT == "after_compile" and rank == 1:
    raise RuntimeError("{message}")          # rank 0 blocks in execute, waiting for B
if FAIL_AT != "inside_execute":
    cg.bind_data("step", np.array(1))
cg.execute()                                 # inside_execute: rank 1's Adam kernel raises
print("rank", rank, "finished", flush=True)
"""

# where rank 1 fails, text that must appear exactly once in the job's output
CASES = [
    ("before_compile", f"RuntimeError: {MESSAGE}"),
    ("after_compile", f"RuntimeError: {MESSAGE}"),
    ("inside_execute", "ZeroDivisionError"),
]


def clean_env():
    env = {key: value for key, value in os.environ.items() if not key.startswith(FOREIGN)}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
    return env


@pytest.mark.skipif(MPI.COMM_WORLD.size > 1, reason="single-process tier (spawns its own job)")
@pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec")
@pytest.mark.parametrize("fail_at, text", CASES)
def test_failing_rank_stops_the_job(tmp_path, fail_at, text):
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent(SCRIPT.format(fail_at=fail_at, message=MESSAGE)))
    start = time.perf_counter()
    result = subprocess.run([MPIEXEC, "-n", "2", sys.executable, str(script)], env=clean_env(),
                            capture_output=True, text=True, timeout=60, cwd=tmp_path)
    elapsed = time.perf_counter() - start
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert elapsed < 30, f"the job took {elapsed:.1f} s to stop"
    assert output.count(text) == 1, output
    assert "[rank 1]" in output and "rank 0 finished" not in output, output
    if fail_at == "inside_execute":   # the kernel's error names op, tile and rank
        assert "in op adam_step_1 (kernel adam_step) computing tile p[0]" in output, output
        assert "on rank 1" in output, output
