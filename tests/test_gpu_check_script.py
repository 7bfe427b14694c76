"""scripts/gpu-check where it cannot run: it says why and exits 2 (the GPU machine runs it
for real; docs/gpu.md)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from cuda_support import cuda_unavailable_reason

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "gpu-check"


def run(tmp_path, *parts):
    env = dict(os.environ, PYTHON=sys.executable, OUT=str(tmp_path))
    return subprocess.run(["bash", str(SCRIPT), *parts], env=env, capture_output=True,
                          text=True, timeout=120)


def test_the_script_parses():
    assert subprocess.run(["bash", "-n", str(SCRIPT)]).returncode == 0


def test_an_unknown_part_is_refused_naming_the_parts(tmp_path):
    result = run(tmp_path, "no-such-part")
    assert result.returncode == 2
    assert "no part no-such-part; parts: table-cuda-fp64" in result.stderr


@pytest.mark.skipif(cuda_unavailable_reason() is None, reason="a GPU is usable here, so the "
                    "script would run its checks instead of refusing; this runs without one")
def test_without_a_gpu_it_says_why_and_exits_2(tmp_path):
    result = run(tmp_path)
    assert result.returncode == 2
    assert f"gpu-check: cannot run: {cuda_unavailable_reason()}" in result.stdout
    assert (tmp_path / "gpu-check" / "preflight.log").exists()
