"""The README's "API in one screen" block runs as a user runs it: plain python (a world
of one) and `mpiexec -n 2` (the block is extracted by its marker, so the test follows
the README's text)."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from mpi4py import MPI

ROOT = Path(__file__).resolve().parents[1]
MARKER = "<!-- api-example"
MPIEXEC = shutil.which("mpiexec", path=str(Path(sys.executable).parent)) or shutil.which("mpiexec")
# a test that spawns its own job runs in the single-process tier only
SPAWNS_A_JOB = pytest.mark.skipif(MPI.COMM_WORLD.size > 1, reason="spawns its own mpiexec job: "
                                  "runs in the single-process tier")
FOREIGN = ("PMI_", "PMIX_", "HYDRA_", "MPIR_", "OMPI_", "SLURM_")   # of an enclosing job


def marked_block(text: str, marker: str) -> str:
    """The fenced python block that follows the line holding `marker`."""
    found = re.search(re.escape(marker) + r".*?\n```python\n(.*?)\n```", text, re.S)
    assert found, f"no ```python block after {marker!r}"
    return found.group(1)


def run_script(script: Path, ranks: int, cwd: Path) -> str:
    env = {key: value for key, value in os.environ.items() if not key.startswith(FOREIGN)}
    env["PYTHONPATH"] = str(ROOT)
    launcher = [MPIEXEC, "-n", str(ranks)] if ranks > 1 else []
    result = subprocess.run([*launcher, sys.executable, str(script)], cwd=cwd, env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    return result.stdout


@SPAWNS_A_JOB
@pytest.mark.parametrize("ranks", [1, pytest.param(2, marks=pytest.mark.skipif(
    MPIEXEC is None, reason="no mpiexec beside the interpreter or on PATH"))])
def test_readme_api_block_runs(ranks, tmp_path):
    script = tmp_path / "api.py"
    script.write_text(marked_block((ROOT / "README.md").read_text(), MARKER))
    stdout = run_script(script, ranks, tmp_path)
    assert "EXEC" in stdout   # rank 0's program was printed
    assert sorted(os.listdir(tmp_path)) == ["api.py"]   # nothing written where it ran
