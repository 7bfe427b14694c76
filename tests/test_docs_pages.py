"""Doc pages run as written, in a scratch folder. docs/pretrained.md: its
`<!-- run: alone -->` blocks each in plain python, its `<!-- run: job -->` blocks as one
script under `mpiexec -n 2` (the page's finetune.py), in page order. Every other page:
its top-level python blocks, one after the other, as one script."""

import re

import pytest

from tests.doc_blocks import page_blocks
from tests.models.gpt2_helpers import require_hf
from tests.test_readme import MPIEXEC, ROOT, SPAWNS_A_JOB, run_script

PAGE = ROOT / "docs" / "pretrained.md"


def page_steps(text: str) -> list:
    """[(kind, code)] in page order, the consecutive job blocks joined into one script."""
    steps = []
    for kind, code in re.findall(r"<!-- run: (alone|job) -->\n```python\n(.*?)\n```", text,
                                 re.S):
        if kind == "job" and steps and steps[-1][0] == "job":
            steps[-1] = ("job", steps[-1][1] + "\n" + code)
        else:
            steps.append((kind, code))
    return steps


@pytest.mark.slow
@SPAWNS_A_JOB
@pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec beside the interpreter "
                    "or on PATH (the mpich wheel of the test extra provides it)")
def test_the_pretrained_page_runs(tmp_path, monkeypatch):
    require_hf()
    steps = page_steps(PAGE.read_text())
    assert [kind for kind, _ in steps] == ["alone", "job", "alone"]
    monkeypatch.chdir(tmp_path)
    outputs = []
    for index, (kind, code) in enumerate(steps):
        if kind == "alone":   # in this process: transformers is imported once, not per step
            exec(compile(code, f"{PAGE.name} step {index}", "exec"), {})
            continue
        script = tmp_path / f"step{index}.py"
        script.write_text(code)
        outputs.append(run_script(script, 2, tmp_path))
    assert outputs[0].count("loss after 20 steps") == 1   # rank 0 prints
    assert (tmp_path / "tiny-gpt2-finetuned" / "model.safetensors").exists()


def page_script(page) -> list:
    """The page's unmarked top-level python blocks (a block inside a list item is a
    fragment of the text around it; a marked block is run, or not, as its marker says)."""
    return [block.code for block in page_blocks(ROOT / "docs" / page)
            if block.lang == "python" and block.indent == 0 and not block.marker]


PAGES = sorted(page.name for page in (ROOT / "docs").glob("*.md")
               if page.name != "pretrained.md" and page_script(page.name))


# pages whose code changes the process for its life, run in a process of their own
OWN_PROCESS = {"launching.md": "configure_blas_threads limits the threads for good"}


@SPAWNS_A_JOB
@pytest.mark.parametrize("page", PAGES)
def test_a_page_runs(page, tmp_path, monkeypatch):
    """The page's top-level python blocks, one after the other, as one script (indented
    blocks inside a list are fragments of the text around them), in this process (the
    imports and kernels are loaded once) from a scratch folder."""
    code = "\n".join(page_script(page))
    if page in OWN_PROCESS:
        script = tmp_path / "page.py"
        script.write_text(code)
        run_script(script, 1, tmp_path)
        return
    monkeypatch.chdir(tmp_path)
    exec(compile(code, f"docs/{page}", "exec"), {"__name__": "__main__"})
