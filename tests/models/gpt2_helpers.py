"""Shared by the GPT-2 tests: a tiny HF GPT2LMHeadModel in fp64 and our run of it.

transformers and torch come from the optional `hf` extra. Without them the parity
tests skip with that reason, unless NNTILE_SPMD_REQUIRE_HF=1 (CI sets it), where a
missing extra is a failure: CI must never pass by skipping parity.
"""

import os

import numpy as np
import pytest

import nntile_spmd as nt
from nntile_spmd.models import gpt2

TINY = dict(vocab_size=37, n_positions=12, n_embd=16, n_layer=2, n_head=4,
            layer_norm_epsilon=1e-5)
BATCH, SEQ = 2, 7
# logits 1e-9, loss 1e-10, gradients 1e-7 (relative), as the parity contract says
TOLERANCES = {"logits": 1e-9, "loss": 1e-10, "grads": 1e-7}
# Tilings: the planner's own choice, and tiles smaller than a head (head_dim 4 -> 3),
# than the vocabulary (37 -> 10), than the sequence (7 -> 3) and than n_embd (16 -> 5);
# 4 heads split over 3 ranks under tp is uneven.
SMALL_TILES = {"h0_q": [3, 3, 1, 2], "logits": [10, 3, 1], "h_in": [5, 3, 1],
               "h0_fc": [20, 3, 1]}


def require_hf():
    """(torch, transformers), or skip/fail as the module docstring says."""
    try:
        import torch
        import transformers
    except ImportError as error:
        if os.environ.get("NNTILE_SPMD_REQUIRE_HF"):
            pytest.fail(f"NNTILE_SPMD_REQUIRE_HF is set but the hf extra is missing: {error}")
        pytest.skip(f"needs the hf extra (pip install -e '.[hf]'): {error}")
    return torch, transformers


def hf_reference(seed=0, ignore=((1, 2),)):
    """(our config, HF state dict as arrays, input ids [T, B], targets [T, B], HF results)."""
    torch, transformers = require_hf()
    torch.manual_seed(seed)
    hf_config = transformers.GPT2Config(**TINY, resid_pdrop=0.0, embd_pdrop=0.0,
                                        attn_pdrop=0.0, bos_token_id=0, eos_token_id=0)
    model = transformers.GPT2LMHeadModel(hf_config).double().eval()
    rng = np.random.default_rng(seed)
    with torch.no_grad():   # non-trivial LayerNorm and bias values, not HF's 1/0 init
        for name, param in model.named_parameters():
            if name.endswith("bias") or ".ln_" in name:
                param.add_(torch.from_numpy(rng.normal(0, 0.1, tuple(param.shape))))
    ids = rng.integers(0, TINY["vocab_size"], (BATCH, SEQ))
    labels = ids.copy()
    for b, t in ignore:   # HF shifts labels by one; -100 positions are ignored
        labels[b, t] = -100
    logits = model(input_ids=torch.from_numpy(ids)).logits
    # HF's own loss (ForCausalLMLoss) upcasts the logits to fp32; the same shifted
    # mean cross-entropy is computed here in fp64 so parity is checked at fp64 precision.
    loss = torch.nn.functional.cross_entropy(
        logits[:, :-1].reshape(-1, TINY["vocab_size"]),
        torch.from_numpy(labels[:, 1:]).reshape(-1), ignore_index=-100)
    loss.backward()
    results = {"logits": logits.detach().numpy().transpose(2, 1, 0),   # [V, T, B]
               "loss": loss.item(),
               "grads": {n: p.grad.numpy().copy() for n, p in model.named_parameters()}}
    state = {n: v.numpy().copy() for n, v in model.state_dict().items()}
    targets = np.full((SEQ, BATCH), -100, dtype=np.int64)
    targets[:-1] = labels[:, 1:].T
    config = gpt2.GPT2Config.from_hf(hf_config)
    return config, state, ids.T.astype(np.int64), targets, results


def run_ours(config, state, ids, targets, comm, distribution, tiles=None, device="auto"):
    """Compile GPT-2 in fp64 on `device`, load HF weights, execute once; (model, cg)."""
    model = gpt2.build_gpt2(config, batch=BATCH, seq=SEQ, dtype="fp64")
    tiling = nt.TilingStrategy.manual(tiles) if tiles else None
    cg = nt.compile(model.graph, comm=comm, tiling=tiling, distribution=distribution,
                    device=device)
    model.load_hf_state_dict(cg, state)
    cg.bind_data("input_ids", ids)
    cg.bind_data("targets", targets)
    cg.execute()
    cg.wait()
    return model, cg


def parity_problems(model, cg, results) -> list:
    """Every way our logits, loss and gradients differ from HF's beyond tolerance."""
    problems = []

    def compare(what, ours, theirs, tolerance):
        ours, theirs = np.asarray(ours), np.asarray(theirs)
        scale = max(np.abs(theirs).max(), 1e-30)
        error = np.abs(ours - theirs).max() / scale
        if not error <= tolerance:
            problems.append(f"{what}: relative error {error:.2e} > {tolerance:.0e}")

    compare("logits", cg.get_output("logits"), results["logits"], TOLERANCES["logits"])
    compare("loss", cg.get_output("loss"), results["loss"], TOLERANCES["loss"])
    grads = model.hf_grads(cg)
    if set(grads) != set(results["grads"]):
        problems.append(f"gradient names differ: {sorted(set(grads) ^ set(results['grads']))}")
    for name in sorted(set(grads) & set(results["grads"])):
        compare(f"grad {name}", grads[name], results["grads"][name], TOLERANCES["grads"])
    return problems
