"""GPT-2 and Llama with the structural causal mask (the default, attention_mask="causal":
attention blocks above the diagonal skipped) give bitwise the loss, logits and gradients
of the same models masked by a bool constant (attention_mask="tensor"), fp64, on 1 and 3
simulated ranks under every preset, the sequence cut into uneven tiles; and the plan has
fewer FLOPs and a lower peak on every rank."""

import numpy as np
import pytest

import nntile_spmd as nt
from nntile_spmd.models import gpt2, llama

SEQ, BATCH = 11, 3
TILES = {"input_ids": [4, 2]}   # key and query tiles 4, 4, 3: three blocks of nine absent


def build(family, attention_mask):
    if family == "gpt2":
        config = gpt2.GPT2Config(vocab_size=32, n_positions=16, n_embd=16, n_layer=2,
                                 n_head=2)
        return gpt2.build_gpt2(config, batch=BATCH, seq=SEQ, dtype="fp64",
                               attention_mask=attention_mask)
    config = llama.LlamaConfig(vocab_size=32, hidden_size=16, intermediate_size=24,
                               num_hidden_layers=2, num_attention_heads=4,
                               num_key_value_heads=2, max_position_embeddings=16)
    return llama.build_llama(config, batch=BATCH, seq=SEQ, dtype="fp64",
                             attention_mask=attention_mask)


def step(family, attention_mask, ranks, preset):
    """One forward and backward; the parameters' owners differ between the two models
    (the bool constant takes a turn in FSDP's round-robin), so sums over ranks run in
    the deterministic order for both."""
    model = build(family, attention_mask)
    model.logits.mark_output()
    cg = nt.compile(model.graph, comm=nt.SimulatedWorld(ranks), distribution=preset,
                    tiling=nt.TilingStrategy.manual(TILES), deterministic=True)
    rng = np.random.default_rng(3)
    for name, value in model.init_params(rng).items():
        cg.bind_data(name, value)
    ids = rng.integers(0, 32, (SEQ, BATCH))
    cg.bind_data("input_ids", np.asfortranarray(ids))
    cg.bind_data("targets", np.asfortranarray(np.roll(ids, -1, axis=0)))
    cg.execute()
    names = ["loss", "logits"] + [grad.name for grad in model.grads]
    return {name: cg.get_output(name) for name in names}, cg


@pytest.mark.parametrize("family", ["gpt2", "llama"])
@pytest.mark.parametrize("ranks, preset", [(1, "single"), (3, "ddp"), (3, "fsdp"),
                                           (3, "tp")])
def test_structural_mask_is_bitwise_the_bool_mask(family, ranks, preset):
    dense, dense_cg = step(family, "tensor", ranks, preset)
    causal, causal_cg = step(family, "causal", ranks, preset)
    for name, value in dense.items():
        np.testing.assert_array_equal(causal[name], value, err_msg=name)
    assert causal_cg.plan.flops() < dense_cg.plan.flops()
    if preset != "fsdp":   # there the parameters' owners differ, and with them the peaks
        for rank in range(ranks):
            assert causal_cg.memory_on_rank(rank) < dense_cg.memory_on_rank(rank)
    causal_cg.check_stats()


def test_unknown_attention_mask_raises():
    with pytest.raises(ValueError, match="attention_mask='sliding'"):
        build("gpt2", "sliding")
