"""The user's command: under `mpiexec -n 2`, a folder written by transformers loads under
fsdp with transformers' logits, save_pretrained writes a folder transformers loads, and
the Generator under tp gives transformers' greedy tokens (one subprocess job)."""

import textwrap

import numpy as np
import pytest

from tests.models.test_pretrained import hf_folder, hf_logits
from tests.test_readme import MPIEXEC, SPAWNS_A_JOB, run_script

SCRIPT = """
import numpy as np
import nntile_spmd as nt
from nntile_spmd.models import gpt2

ids = np.load("ids.npy")
cfg = gpt2.GPT2Config.from_pretrained("hf")
model = gpt2.build_gpt2(cfg, batch=ids.shape[1], seq=ids.shape[0], dtype="fp64")
cg = nt.compile(model.graph, distribution="fsdp")
model.load_pretrained(cg, "hf")
cg.bind_data("input_ids", ids)
cg.bind_data("targets", ids)
cg.execute(); cg.wait()
logits = cg.get_output("logits")
model.save_pretrained(cg, "ours")
gen = gpt2.Generator(cfg, "hf", batch=ids.shape[1], max_length=8, dtype="fp64",
                     distribution="tp")
tokens = gen.generate(ids[:3], max_new_tokens=5)
if cg.world.rank == 0:
    np.save("logits.npy", logits)
    np.save("tokens.npy", tokens)
print("rank", cg.world.rank, "done")
"""


@pytest.mark.slow
@SPAWNS_A_JOB
@pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec beside the interpreter "
                    "or on PATH (the mpich wheel of the test extra provides it)")
def test_load_save_generate_on_two_ranks(tmp_path):
    import torch
    model = hf_folder("gpt2", tmp_path / "hf", bos_token_id=None, eos_token_id=None)
    ids = np.asfortranarray(np.random.default_rng(4).integers(0, 29, (6, 2)))
    np.save(tmp_path / "ids.npy", ids)
    (tmp_path / "job.py").write_text(textwrap.dedent(SCRIPT))
    stdout = run_script(tmp_path / "job.py", 2, tmp_path)
    assert stdout.count("done") == 2, stdout
    expected = hf_logits(model, "gpt2", ids)
    np.testing.assert_allclose(np.load(tmp_path / "logits.npy"), expected, rtol=1e-9,
                               atol=1e-8)
    np.testing.assert_allclose(hf_logits(tmp_path / "ours", "gpt2", ids), expected,
                               rtol=1e-9, atol=1e-8)
    with torch.no_grad():
        greedy = model.generate(torch.from_numpy(ids[:3].T.copy()), max_new_tokens=5,
                                do_sample=False).numpy().T
    np.testing.assert_array_equal(np.load(tmp_path / "tokens.npy"), greedy)


