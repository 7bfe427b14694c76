"""Mistral folders (Llama with a sliding window) load as Llama: transformers'
MistralForCausalLM logits and greedy tokens in fp64 while the sequence fits the window
(the window then hides nothing), our save_pretrained writes a Mistral folder back, and a
longer sequence is refused naming the window (sliding-window attention is not built)."""

import json

import numpy as np
import pytest

import nntile_spmd as nt
from nntile_spmd.models import llama
from tests.models.gpt2_helpers import require_hf
from tests.models.test_pretrained import LLAMA_TINY, RTOL, hf_logits

WINDOW = 6
PROMPT = np.random.default_rng(0).integers(0, 29, (3, 2))   # [T0, B]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """(a tiny random fp64 Mistral folder saved by transformers, the model)."""
    torch, transformers = require_hf()
    path = tmp_path_factory.mktemp("mistral")
    torch.manual_seed(0)
    config = transformers.MistralConfig(**LLAMA_TINY | {"sliding_window": WINDOW,
                                                        "bos_token_id": None,
                                                        "eos_token_id": None})
    model = transformers.MistralForCausalLM(config).double().eval()
    with torch.no_grad():   # norms away from 1, so a mixup shows
        for param in model.parameters():
            if param.ndim == 1:
                param.add_(0.1 * torch.randn_like(param))
    model.save_pretrained(path)
    return path, model


def test_logits_and_save_within_the_window(folder, tmp_path):
    path, reference = folder
    cfg = llama.LlamaConfig.from_pretrained(path)
    assert (cfg.model_type, cfg.sliding_window) == ("mistral", WINDOW)
    ids = np.asfortranarray(np.random.default_rng(1).integers(0, 29, (WINDOW, 2)))
    model = llama.build_llama(cfg, batch=2, seq=WINDOW, dtype="fp64", with_grads=False)
    cg = nt.compile(model.graph, comm=nt.SimulatedWorld(2), distribution="tp")
    model.load_pretrained(cg, path)
    cg.bind_data("input_ids", ids)
    cg.bind_data("targets", ids)
    cg.execute()
    cg.wait()
    expected = hf_logits(reference, "llama", ids)
    np.testing.assert_allclose(cg.get_output("logits"), expected, rtol=RTOL["llama"],
                               atol=1e-8)
    model.save_pretrained(cg, tmp_path / "ours")
    saved = json.loads((tmp_path / "ours" / "config.json").read_text())
    assert (saved["model_type"], saved["architectures"], saved["sliding_window"]) == (
        "mistral", ["MistralForCausalLM"], WINDOW)
    np.testing.assert_allclose(hf_logits(tmp_path / "ours", "llama", ids), expected,
                               rtol=1e-12, atol=1e-14)


def test_greedy_tokens_within_the_window(folder):
    torch, _ = require_hf()
    path, reference = folder
    new = WINDOW - PROMPT.shape[0]
    with torch.no_grad():
        expected = reference.generate(torch.from_numpy(PROMPT.T.copy()), max_new_tokens=new,
                                      do_sample=False).numpy().T
    gen = llama.Generator(llama.LlamaConfig.from_pretrained(path), path, batch=2,
                          max_length=WINDOW, dtype="fp64", comm=nt.SimulatedWorld(2),
                          distribution="tp")
    np.testing.assert_array_equal(gen.generate(PROMPT, new), expected)


def test_beyond_the_window_is_refused(folder):
    path, _ = folder
    cfg = llama.LlamaConfig.from_pretrained(path)
    with pytest.raises(ValueError, match="build_llama: seq: 7 positions exceed the config's "
                                         "sliding_window=6 \\(mistral\\)"):
        llama.build_llama(cfg, batch=1, seq=WINDOW + 1)
    with pytest.raises(ValueError, match="Generator: max_length: 7 positions exceed"):
        llama.Generator(cfg, path, batch=1, max_length=WINDOW + 1, dtype="fp64",
                        comm=nt.SimulatedWorld(1))


def test_a_llama_folder_names_no_window():
    cfg = llama.LlamaConfig(**{k: v for k, v in LLAMA_TINY.items() if "token" not in k})
    assert "sliding_window" not in cfg.to_hf_dict()
    assert cfg.to_hf_dict()["architectures"] == ["LlamaForCausalLM"]
    with pytest.raises(ValueError, match="model_type 'bert', expected one of"):
        llama.LlamaConfig(model_type="bert").check()
