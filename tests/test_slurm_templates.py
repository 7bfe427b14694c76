"""slurm/: the batch templates bind one GPU per rank by node-local rank (gpu_per_rank.sh),
with the formula of runtime.threads.gpu_for_rank."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from nntile_spmd.runtime.threads import gpu_for_rank

SLURM = Path(__file__).resolve().parents[1] / "slurm"
WRAPPER = SLURM / "gpu_per_rank.sh"
TEMPLATES = sorted(SLURM.glob("*.sbatch"))
BASH = shutil.which("bash")
pytestmark = pytest.mark.skipif(BASH is None, reason="needs bash")


def visible_after_wrapper(visible, local_id):
    """CUDA_VISIBLE_DEVICES as a rank sees it inside the wrapper (None: unset)."""
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    env.update(SLURM_LOCALID=str(local_id), **({} if visible is None else
                                               {"CUDA_VISIBLE_DEVICES": visible}))
    out = subprocess.run([str(WRAPPER), BASH, "-c", 'echo "${CUDA_VISIBLE_DEVICES-unset}"'],
                         env=env, capture_output=True, text=True, check=True).stdout.strip()
    return None if out == "unset" else out


@pytest.mark.parametrize("visible", ["0,1,2,3", "2,3,6,7", "0,1"])
def test_wrapper_keeps_the_gpu_of_the_node_local_rank(visible):
    gpus = visible.split(",")
    for local_id in range(6):
        assert visible_after_wrapper(visible, local_id) == gpus[gpu_for_rank(local_id, len(gpus))]


def test_wrapper_leaves_a_bound_gpu_and_cpu_nodes_alone():
    assert visible_after_wrapper("5", 3) == "5"   # Slurm bound this task to GPU 5
    assert visible_after_wrapper(None, 3) is None  # no GPUs: nothing is set


@pytest.mark.parametrize("template", TEMPLATES, ids=lambda p: p.name)
def test_templates_ask_one_gpu_per_task_and_run_through_the_wrapper(template):
    text = template.read_text()
    subprocess.run([BASH, "-n", str(template)], check=True)
    assert "#SBATCH --gpus-per-task=1" in text
    assert "slurm/gpu_per_rank.sh python " in text
