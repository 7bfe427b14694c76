"""load_pretrained compares only the config fields that change the computation
(config_rules.FIELDS_LOADING_IGNORES names the others, with why): a folder whose config
differs from the model's in initializer_range or a dropout probability loads; one that
differs in a field of the model's shape or arithmetic is refused, naming the fields."""

from dataclasses import fields, replace

import nntile_spmd as nt
from nntile_spmd.models import gpt2, llama
from nntile_spmd.models.config_rules import FIELDS_LOADING_IGNORES, fields_that_differ
from tests.models.test_pretrained import LLAMA_TINY, hf_folder


def test_a_folder_that_differs_in_the_initial_spread_and_dropout_loads(tmp_path):
    """Before: refused, "the folder's config differs from the model's in
    ['initializer_range']"."""
    hf_folder("gpt2", tmp_path / "hf")
    cfg = gpt2.GPT2Config.from_pretrained(tmp_path / "hf")
    loose = replace(cfg, initializer_range=0.5, resid_pdrop=0.3, embd_pdrop=0.2)
    model = gpt2.build_gpt2(loose, batch=1, seq=4, dtype="fp64", with_grads=False)
    model.load_pretrained(nt.compile(model.graph, comm=nt.SimulatedWorld(1)), tmp_path / "hf")


def test_the_fields_that_change_the_computation_are_compared():
    cfg = gpt2.GPT2Config(n_layer=1, n_embd=12, n_head=2)
    assert fields_that_differ(cfg, replace(cfg, initializer_range=1.0, attn_pdrop=0.0)) == []
    assert fields_that_differ(cfg, replace(cfg, layer_norm_epsilon=1e-3, n_head=3,
                                           initializer_range=1.0)) == \
        ["n_head", "layer_norm_epsilon"]
    llama_cfg = llama.LlamaConfig(**{k: v for k, v in LLAMA_TINY.items() if "token" not in k})
    assert fields_that_differ(llama_cfg, replace(llama_cfg, initializer_range=1.0,
                                                 attention_dropout=0.1)) == []
    assert fields_that_differ(llama_cfg, replace(llama_cfg, rope_theta=500.0)) == ["rope_theta"]
    known = {f.name for config in (gpt2.GPT2Config, llama.LlamaConfig) for f in fields(config)}
    assert set(FIELDS_LOADING_IGNORES) <= known   # no stale name in the table
