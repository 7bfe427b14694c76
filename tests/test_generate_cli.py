"""`python -m nntile_spmd.generate FOLDER --prompt TEXT`: a GPT-2 folder with vocab.json +
merges.txt continues the prompt with transformers' greedy tokens, decoded by transformers'
GPT2Tokenizer (fp64), on 2 simulated ranks in this process and on 2 real ranks under
mpiexec (tp); a folder it cannot read is refused naming why."""

import os
import subprocess
import sys

import pytest

from tests.models.gpt2_helpers import require_hf
from tests.test_readme import FOREIGN, MPIEXEC, ROOT, SPAWNS_A_JOB

PROMPT = "def hello(name):"
NEW = 6


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """(a GPT-2 folder with GPT-2's classic tokenizer files, transformers' text)."""
    torch, transformers = require_hf()
    from tests.models.test_pretrained import hf_folder
    from tests.models.test_text_codec import write_bpe_files
    path = tmp_path_factory.mktemp("gpt2")
    model = hf_folder("gpt2", path, vocab_size=320, n_positions=32, bos_token_id=None,
                      eos_token_id=None)
    write_bpe_files(path)
    tokenizer = transformers.GPT2Tokenizer(str(path / "vocab.json"), str(path / "merges.txt"))
    with torch.no_grad():
        ids = model.generate(torch.tensor([tokenizer.encode(PROMPT)]), max_new_tokens=NEW,
                             do_sample=False)[0].tolist()
    return path, tokenizer.decode(ids)


def arguments(path, *more):
    return [str(path), "--prompt", PROMPT, "--max-new-tokens", str(NEW), "--dtype", "fp64",
            *more]


def test_greedy_text_is_transformers_on_simulated_ranks(folder, capsys):
    from nntile_spmd.generate import main
    path, expected = folder
    main(arguments(path, "--distribution", "tp", "--simulate", "2"))
    assert capsys.readouterr().out == expected + "\n"


@pytest.mark.slow
@SPAWNS_A_JOB
@pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec beside the interpreter or on PATH")
def test_greedy_text_is_transformers_under_mpiexec(folder, tmp_path):
    path, expected = folder
    env = {key: value for key, value in os.environ.items() if not key.startswith(FOREIGN)}
    env["PYTHONPATH"] = str(ROOT)
    result = subprocess.run([MPIEXEC, "-n", "2", sys.executable, "-m", "nntile_spmd.generate",
                             *arguments(path, "--distribution", "tp")], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    assert result.stdout == expected + "\n"   # rank 0 prints, once


def test_what_it_cannot_read_is_refused(folder, tmp_path):
    from nntile_spmd.generate import main
    path, _ = folder
    (tmp_path / "config.json").write_text('{"model_type": "bert"}')
    with pytest.raises(SystemExit, match="model_type 'bert', expected one of"):
        main([str(tmp_path), "--prompt", "x"])
    with pytest.raises(SystemExit, match="no config.json"):
        main([str(tmp_path / "absent"), "--prompt", "x"])
    with pytest.raises(SystemExit, match="need 1 <= prompt tokens < 32"):
        main([str(path), "--prompt", PROMPT * 10])
