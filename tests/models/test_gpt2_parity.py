"""GPT-2 against transformers' GPT2LMHeadModel in fp64: logits, loss and every
parameter gradient, under every preset on 2 and 3 simulated ranks and on one (where
every preset plans what `single` does: test_one_rank_presets.py), with the
planner's tiles and with tiles smaller than a head, the vocabulary and the sequence.
The same checks run on real MPI ranks in test_gpt2_mpi.py."""

import numpy as np
import pytest
from gpt2_helpers import (BATCH, SEQ, SMALL_TILES, TINY, hf_reference, parity_problems,
                          require_hf, run_ours)
from helpers import worlds_and_presets

import nntile_spmd as nt
from nntile_spmd.models import gpt2


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


def test_state_dict_round_trip_is_bit_exact(reference):
    config, state, ids, targets, _ = reference
    model, cg = run_ours(config, state, ids, targets, nt.SimulatedWorld(2), "tp")
    back = model.hf_state_dict(cg)
    wanted = {name for name in state if not name.endswith((".attn.bias", ".attn.masked_bias"))}
    assert set(back) == wanted
    for name in wanted:
        assert back[name].shape == state[name].shape, name
        assert np.array_equal(back[name], state[name]), name


def test_tp_splits_heads_mlp_and_vocabulary():
    config = gpt2.GPT2Config(**TINY)
    model = gpt2.build_gpt2(config, batch=BATCH, seq=SEQ, dtype="fp64", with_grads=False)
    cg = nt.compile(model.graph, comm=nt.SimulatedWorld(3), distribution="tp")
    distributions = cg.plan.distributions
    for name, dim in [("h0_q_weight", 0), ("h0_attn_proj_weight", 1), ("h0_fc_weight", 0),
                      ("h0_proj_weight", 1), ("wte", 1), ("logits", 0)]:
        assert distributions[name] == nt.TileDistribution.block_along_dim(dim), name
    assert distributions["h_in"] == nt.TileDistribution.replicated()


def test_load_rejects_wrong_state_dicts(reference):
    config, state, *_ = reference
    model = gpt2.build_gpt2(config, batch=BATCH, seq=SEQ, dtype="fp64", with_grads=False)
    cg = nt.compile(model.graph, comm=nt.SimulatedWorld(1))
    broken = dict(state)
    del broken["transformer.h.1.mlp.c_fc.bias"]
    with pytest.raises(KeyError, match="c_fc.bias"):
        model.load_hf_state_dict(cg, broken)
    untied = dict(state, **{"lm_head.weight": state["lm_head.weight"] + 1})
    with pytest.raises(ValueError, match="tied"):
        model.load_hf_state_dict(cg, untied)


def test_init_params_follow_gpt2_initialization():
    require_hf()
    config = gpt2.GPT2Config(vocab_size=64, n_positions=16, n_embd=32, n_layer=3, n_head=4)
    model = gpt2.build_gpt2(config, batch=1, seq=4, with_grads=False)
    params = model.init_params(np.random.default_rng(0))
    assert set(model.param_names) | {"position_ids"} == set(params)   # the mask is structural
    assert np.all(params["h0_ln_1_weight"] == 1) and np.all(params["h2_fc_bias"] == 0)
    assert params["wte"].dtype == np.float32
    residual = 0.02 / np.sqrt(2 * 3)
    assert abs(params["h1_proj_weight"].std() - residual) < 0.15 * residual
    assert abs(params["h1_fc_weight"].std() - 0.02) < 0.1 * 0.02
