"""Llama against transformers' LlamaForCausalLM in fp64 (see llama_helpers for the
reference's fp64 lifts): logits, loss and every parameter gradient, under every
preset on 1, 2 and 3 simulated ranks, with the planner's tiles and with tiles smaller
than the vocabulary, the sequence, the hidden size and the MLP; grouped-query
attention (4 query heads, 2 key/value heads), tied and untied heads. The same checks
run on real MPI ranks in test_llama_mpi.py."""

import numpy as np
import pytest
from gpt2_helpers import parity_problems, require_hf
from helpers import worlds_and_presets
from llama_helpers import BATCH, SEQ, SMALL_TILES, TINY, hf_reference, run_ours

import nntile_spmd as nt
from nntile_spmd.models import llama


@pytest.fixture(scope="module")
def reference():
    return hf_reference()


@pytest.mark.parametrize("tiles", [None, SMALL_TILES], ids=["auto", "small"])
@pytest.mark.parametrize("ranks, distribution", worlds_and_presets((1, 2, 3)))
def test_parity_with_transformers(reference, ranks, distribution, tiles):
    config, state, ids, targets, results = reference
    model, cg = run_ours(config, state, ids, targets, nt.SimulatedWorld(ranks),
                         distribution, tiles)
    assert parity_problems(model, cg, results) == []


@pytest.mark.parametrize("overrides", [dict(tie_word_embeddings=True),
                                       dict(num_key_value_heads=4),
                                       dict(num_key_value_heads=1, num_hidden_layers=1)],
                         ids=["tied", "multi_head", "one_kv_head"])
@pytest.mark.parametrize("ranks, distribution", [(1, "single"), (3, "tp")])
def test_parity_of_variants(overrides, ranks, distribution):
    config, state, ids, targets, results = hf_reference(seed=1, **overrides)
    model, cg = run_ours(config, state, ids, targets, nt.SimulatedWorld(ranks),
                         distribution, SMALL_TILES)
    assert parity_problems(model, cg, results) == []


def test_state_dict_round_trip_is_bit_exact(reference):
    config, state, ids, targets, _ = reference
    model, cg = run_ours(config, state, ids, targets, nt.SimulatedWorld(2), "tp")
    back = model.hf_state_dict(cg)
    assert set(back) == set(state)
    for name in state:
        assert back[name].shape == state[name].shape, name
        assert np.array_equal(back[name], state[name]), name


def test_tied_state_dict_round_trip_and_rejections():
    config, state, *_ = hf_reference(seed=2, tie_word_embeddings=True)
    model = llama.build_llama(config, batch=BATCH, seq=SEQ, dtype="fp64", with_grads=False)
    cg = nt.compile(model.graph, comm=nt.SimulatedWorld(1))
    model.load_hf_state_dict(cg, state)
    back = model.hf_state_dict(cg)
    assert set(back) == set(state) | {"lm_head.weight"}
    assert np.array_equal(back["lm_head.weight"], state["model.embed_tokens.weight"])
    untied = dict(state, **{"lm_head.weight": state["model.embed_tokens.weight"] + 1})
    with pytest.raises(ValueError, match="tie_word_embeddings"):
        model.load_hf_state_dict(cg, untied)


def test_load_rejects_wrong_state_dicts(reference):
    config, state, *_ = reference
    model = llama.build_llama(config, batch=BATCH, seq=SEQ, dtype="fp64", with_grads=False)
    cg = nt.compile(model.graph, comm=nt.SimulatedWorld(1))
    broken = dict(state)
    del broken["model.layers.1.mlp.up_proj.weight"]
    with pytest.raises(KeyError, match="up_proj"):
        model.load_hf_state_dict(cg, broken)
    wrong = dict(state, **{"model.norm.weight": np.ones(3)})
    with pytest.raises(ValueError, match="model.norm.weight gives norm_weight shape"):
        model.load_hf_state_dict(cg, wrong)


def test_tp_splits_whole_kv_groups_mlp_and_vocabulary():
    config = llama.LlamaConfig(**TINY)
    model = llama.build_llama(config, batch=BATCH, seq=SEQ, dtype="fp64", with_grads=False)
    cg = nt.compile(model.graph, comm=nt.SimulatedWorld(2), distribution="tp")
    distributions = cg.plan.distributions
    for name, dim in [("h0_q_weight", 1), ("h0_k_weight", 0), ("h0_v_weight", 0),
                      ("h0_o_weight", 2), ("h0_q", 4), ("h0_k", 4), ("h0_gate_weight", 0),
                      ("h0_up_weight", 0), ("h0_down_weight", 1), ("embed_tokens", 1),
                      ("lm_head", 0), ("logits", 0)]:
        assert distributions[name] == nt.TileDistribution.block_along_dim(dim), name
    assert distributions["h_in"] == nt.TileDistribution.replicated()


def test_multi_head_attention_has_no_group_dim_and_no_broadcast():
    config = llama.LlamaConfig(**TINY | {"num_key_value_heads": 4})
    model = llama.build_llama(config, batch=BATCH, seq=SEQ, dtype="fp64", with_grads=False)
    assert model.graph.get_tensor("h0_q_weight").shape == (4, 4, 16)
    assert model.graph.get_tensor("h0_o_weight").shape == (16, 4, 4)
    assert "scale_slice" not in {op.op_type for op in model.graph.ops()}
    cg = nt.compile(model.graph, comm=nt.SimulatedWorld(3), distribution="tp")
    for name, dim in [("h0_q_weight", 0), ("h0_o_weight", 1), ("h0_k_weight", 0)]:
        assert cg.plan.distributions[name] == nt.TileDistribution.block_along_dim(dim), name


def test_config_follows_transformers():
    _, transformers = require_hf()
    ours, theirs = llama.LlamaConfig(), transformers.LlamaConfig()
    for name in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                 "num_attention_heads", "num_key_value_heads", "rms_norm_eps",
                 "max_position_embeddings", "tie_word_embeddings", "head_dim"):
        assert getattr(ours, name) == getattr(theirs, name), name
    assert ours.rope_theta == theirs.rope_parameters["rope_theta"]
    grouped = llama.LlamaConfig.from_hf(transformers.LlamaConfig(
        num_attention_heads=8, num_key_value_heads=2, hidden_size=64,
        rope_parameters={"rope_type": "default", "rope_theta": 5e5}))
    assert (grouped.rep, grouped.head_dim, grouped.rope_theta) == (4, 8, 5e5)
    with pytest.raises(ValueError, match="not a multiple"):
        llama.build_llama(llama.LlamaConfig(**TINY | {"num_key_value_heads": 3}), 1, 4)


def test_init_params_follow_llama_initialization():
    config = llama.LlamaConfig(**TINY | {"hidden_size": 32, "intermediate_size": 64})
    model = llama.build_llama(config, batch=1, seq=4, with_grads=False)
    params = model.init_params(np.random.default_rng(0))
    assert set(model.param_names) | {"rope_sin", "rope_cos"} == set(params)   # mask: structural
    assert np.all(params["h0_input_norm_weight"] == 1) and np.all(params["norm_weight"] == 1)
    assert params["embed_tokens"].dtype == np.float32
    assert abs(params["h1_gate_weight"].std() - 0.02) < 0.1 * 0.02
