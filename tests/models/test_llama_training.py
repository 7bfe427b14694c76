"""Llama trains here: AdamW steps in fp32 lower the loss, and every preset on 1, 2
and 3 simulated ranks follows the single-process loss curve step by step (fp32:
to float rounding; fp64: to 1e-9 relative). Grouped-query attention (4 query heads,
2 key/value heads) and an untied head, as in the parity tests."""

import numpy as np
import pytest

import nntile_spmd as nt
from nntile_spmd.models import llama
from nntile_spmd.train import add_optimizer

CONFIG = dict(vocab_size=23, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=8)
BATCH, SEQ, STEPS = 3, 8, 8


def batches(seed=0):
    """Repeated copies of one short periodic sequence, so the model can learn it."""
    rng = np.random.default_rng(seed)
    pattern = rng.integers(0, CONFIG["vocab_size"], 5)
    stream = np.tile(pattern, 20)
    out = []
    for _ in range(STEPS):
        starts = rng.integers(0, len(stream) - SEQ - 1, BATCH)
        ids = np.stack([stream[s:s + SEQ] for s in starts], axis=1)          # [T, B]
        targets = np.stack([stream[s + 1:s + SEQ + 1] for s in starts], axis=1)
        out.append((ids.astype(np.int64), targets.astype(np.int64)))
    return out


def loss_curve(dtype, ranks, distribution):
    model = llama.build_llama(llama.LlamaConfig(**CONFIG), batch=BATCH, seq=SEQ, dtype=dtype)
    add_optimizer(model.graph, model.params, model.grads, "adamw", lr=1e-2,
                  weight_decay=0.01)
    cg = nt.compile(model.graph, comm=nt.SimulatedWorld(ranks), distribution=distribution)
    for name, value in model.init_params(np.random.default_rng(1)).items():
        cg.bind_data(name, value)
    losses = []
    for ids, targets in batches():
        cg.bind_data("input_ids", ids)
        cg.bind_data("targets", targets)
        cg.execute()
        losses.append(float(cg.get_output("loss")))
    return np.array(losses)


@pytest.fixture(scope="module")
def reference_curves():
    return {dtype: loss_curve(dtype, 1, "single") for dtype in ("fp32", "fp64")}


def test_loss_decreases(reference_curves):
    losses = reference_curves["fp32"]
    assert losses[-1] < 0.8 * losses[0], losses


@pytest.mark.parametrize("distribution", ["ddp", "fsdp", "tp"])
@pytest.mark.parametrize("ranks", [1, 2, 3])
def test_presets_follow_the_single_process_curve(reference_curves, ranks, distribution):
    np.testing.assert_allclose(loss_curve("fp32", ranks, distribution),
                               reference_curves["fp32"], rtol=2e-5)


@pytest.mark.parametrize("distribution", ["ddp", "fsdp", "tp"])
def test_presets_agree_in_fp64(reference_curves, distribution):
    np.testing.assert_allclose(loss_curve("fp64", 2, distribution),
                               reference_curves["fp64"], rtol=1e-9)
