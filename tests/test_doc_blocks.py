"""Every fenced code block of README.md and docs/*.md is run by a test, or is marked in its
page as not meant to run (`<!-- not run: why -->` on the line before it) and listed in
NOT_RUN here, so that no block is skipped silently. Blocks marked `<!-- run: bash -->`
run here, in a scratch folder that sees the repository's scripts."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.doc_blocks import ROOT, all_blocks
from tests.test_readme import FOREIGN, SPAWNS_A_JOB

# benchmarks.md records, beside each result, the command that measured it on the machine
# named there (minutes of a benchmark each): records, not examples to run
RECORDS = {"docs/benchmarks.md"}
# a bare block that starts with one of these is a command, so it must say its language
COMMANDS = ("python", "mpiexec", "pip", "PYTHONPATH", "srun", "source", "./", "launch/",
            "for ", "env ", "sbatch")

# (page, first line) of every block marked `<!-- not run: ... -->`; the page says why
NOT_RUN = {
    ("README.md", "python3 -m venv .venv && . .venv/bin/activate && pip install -e "
                  "'.[examples]' && python -m nntile_spmd.precompile --dtype fp32"),
    ("README.md", "python3 -m venv .venv && . .venv/bin/activate"),
    ("docs/testing.md", "scripts/test-all --latest   # the suite in .venv-latest, on the newest "
                        "releases setup.cfg admits"),
    ("docs/training.md", "mpiexec -n 2 python examples/train_gpt2.py --strategy fsdp            "
                  "# or single, ddp, tp"),
    ("docs/training.md", "mpiexec -n 2 python examples/train_gpt2.py --model llama --strategy fsdp "
                  "--no-progress"),
    ("docs/launching.md", "source .venv/bin/activate               # your venv: its mpiexec "
                          "comes from the mpich wheel"),
    ("docs/launching.md", "python -m nntile_spmd.launch -n 4 examples/train_mlp.py "
                          "--strategy fsdp"),
    ("docs/launching.md", "python -m nntile_spmd.precompile --dtype fp32      # the examples' "
                          "kernels; fp32 fp64 for the tests too"),
    ("docs/launching.md", "srun --cpu-bind=cores --cpus-per-task=$SLURM_CPUS_PER_TASK python "
                          "examples/train_mlp.py --strategy fsdp"),
    ("docs/models.md", "mpiexec -n 2 python examples/train_cnn.py --strategy fsdp      "
                       "# or single, ddp, tp"),
    ("docs/pretrained.md", "mpiexec -n 2 python examples/finetune.py tiny-gpt2 notes.txt --out "
                           "tiny-gpt2-finetuned --steps 50"),
    ("docs/pretrained.md", "mpiexec -n 2 python -m nntile_spmd.generate tiny-gpt2-finetuned "
                           "--prompt \"def hello\" --max-new-tokens 8 --distribution tp"),
    ("docs/autoplan.md", "mpiexec -n 2 python examples/compare_strategies.py --auto          "
                         "# the first 10"),
    ("docs/autoplan.md", "mpiexec -n 2 python examples/compare_strategies.py --model gpt2 "
                         "--torch --steps 10"),
    ("docs/context_parallel.md", "PYTHONPATH=. python benchmarks/bench_cp_peak.py"),
    ("docs/simulation.md", "python -m nntile_spmd.calibrate --out machine.json          "
                           "# once per machine, ~25 s"),
    ("docs/testing.md", "python -m pytest -n auto -m \"not slow\" tests            "
                        "# the single-process tier less the slow tests"),
    ("docs/testing.md", "for i in $(seq 20); do python -m pytest -q -p no:cacheprovider "
                        "tests/runtime/test_faults.py \\"),
    ("docs/testing.md", "export NNTILE_SPMD_TEST_COVERAGE_CONTEXTS=1 COVERAGE_FILE=/tmp/rank.cov"),
    ("docs/testing.md", "NNTILE_SPMD_TEST_CPU_LOG=/tmp/rank.tsv python -m pytest -q "
                        "-p no:cacheprovider tests/plan/test_plan_rank.py"),
    ("docs/training.md", "for step in range(steps):"),
    ("docs/training.md", "python -m pytest tests/train tests/models"),
}


def is_text(block) -> bool:
    """A bare block that is not a command: a program's output, a listing, a diagram."""
    return block.lang in ("", "text") and not block.first_line.startswith(COMMANDS)


# how each block is run, first matching rule wins: (test that runs it, rule)
RULES = (
    ("tests/test_readme.py on 1 and 2 ranks", lambda b: b.marker.startswith("api-example")),
    ("tests/test_docs_pages.py, the pretrained page",
     lambda b: b.marker in ("run: alone", "run: job")),
    ("test_a_bash_block_runs", lambda b: b.marker == "run: bash"),
    ("NOT_RUN", lambda b: b.marker.startswith("not run:")),
    ("tests/test_docs_pages.py, the page's python blocks as one script",
     lambda b: b.lang == "python" and b.indent == 0 and b.page != "docs/pretrained.md"),
    ("text, not code", is_text),
)


def runner(block) -> str:
    return next((name for name, rule in RULES if rule(block)), "")


def test_every_block_is_run_or_marked():
    blocks = [block for block in all_blocks() if block.page not in RECORDS]
    unaccounted = [str(block) for block in blocks if not runner(block)]
    assert not unaccounted, ("code blocks no test runs: run them (a marker, see RULES) or mark "
                             "them <!-- not run: why --> and list them in NOT_RUN:\n"
                             + "\n".join(unaccounted))
    marked = {(block.page, block.first_line) for block in blocks if runner(block) == "NOT_RUN"}
    assert marked == NOT_RUN, (f"marked in the docs but not listed: {marked - NOT_RUN}; "
                               f"listed but not marked: {NOT_RUN - marked}")
    assert any(runner(block) == "test_a_bash_block_runs" for block in blocks)


BASH_BLOCKS = [block for block in all_blocks() if block.marker == "run: bash"]


@SPAWNS_A_JOB
@pytest.mark.parametrize("block", BASH_BLOCKS, ids=str)
def test_a_bash_block_runs(block, tmp_path):
    """As a user runs it from a checkout, in a scratch folder: the repository's folders are
    linked in, so nothing lands in the working tree."""
    for folder in ("examples", "benchmarks", "launch", "scripts"):
        (tmp_path / folder).symlink_to(ROOT / folder)
    env = {key: value for key, value in os.environ.items() if not key.startswith(FOREIGN)}
    env.update(PYTHONPATH=str(ROOT), PATH=f"{Path(sys.executable).parent}:{env['PATH']}")
    result = subprocess.run(["bash", "-e", "-c", block.code], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]


def test_the_index_lists_every_page():
    index = (ROOT / "docs" / "README.md").read_text()
    pages = sorted(page.name for page in (ROOT / "docs").glob("*.md") if page.name != "README.md")
    assert [page for page in pages if f"]({page})" not in index] == []
