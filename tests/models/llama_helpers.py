"""Shared by the Llama tests: a tiny HF LlamaForCausalLM in fp64 and our run of it.

transformers and torch come from the optional `hf` extra (see gpt2_helpers.require_hf:
skip without it, fail under NNTILE_SPMD_REQUIRE_HF=1).

transformers' Llama computes RMSNorm and the rotary sin/cos tables in fp32 whatever
the model's dtype, and its eager attention takes the softmax in fp32: an fp64 model
is then only fp32-accurate. The reference lifts those three to fp64 (the same
formulas, no cast; attention through torch's SDPA), so parity is checked at fp64
precision; our model does that arithmetic in its own dtype.
"""

import types

import numpy as np
from gpt2_helpers import require_hf

import nntile_spmd as nt
from nntile_spmd.models import llama

# 4 query heads sharing 2 key/value heads (rep 2): grouped-query attention
TINY = dict(vocab_size=37, hidden_size=16, intermediate_size=24, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=12,
            rms_norm_eps=1e-5, rope_theta=100.0)
BATCH, SEQ = 2, 7
TOLERANCES = {"logits": 1e-9, "loss": 1e-10, "grads": 1e-7}
# Tiles smaller than the vocabulary (37 -> 10), the sequence (7 -> 3), the hidden size
# (16 -> 5, so RMSNorm reduces over tiles), the MLP inner dim (24 -> 7) and one kv
# group per tile; 2 kv groups over 3 ranks under tp is uneven. head_dim stays whole
# (rope's pairs). h0_k_moved is [head_dim, T, B, kv_heads] whatever the grouping.
SMALL_TILES = {"h0_k_moved": [4, 3, 1, 1], "logits": [10, 3, 1], "h_in": [5, 3, 1],
               "h0_gate": [7, 3, 1]}


def fp64_rms_norm(self, hidden_states):
    variance = hidden_states.pow(2).mean(-1, keepdim=True)
    return self.weight * (hidden_states * (variance + self.variance_epsilon).rsqrt())


def fp64_rotary(torch, theta, head_dim):
    def forward(self, x, position_ids):
        inverse = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
        freqs = position_ids[..., None].to(torch.float64) * inverse
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)
    return forward


def hf_model(seed=0, **overrides):
    """A tiny LlamaForCausalLM in fp64 with non-trivial norm weights, lifted to fp64."""
    torch, transformers = require_hf()
    torch.manual_seed(seed)
    settings = TINY | overrides
    theta = settings.pop("rope_theta")
    hf_config = transformers.LlamaConfig(**settings, rope_parameters={
        "rope_type": "default", "rope_theta": theta}, bos_token_id=0, eos_token_id=0,
        pad_token_id=None)
    hf_config._attn_implementation = "sdpa"
    model = transformers.LlamaForCausalLM(hf_config).double().eval()
    rng = np.random.default_rng(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "norm" in name:   # not HF's all-ones init
                param.add_(torch.from_numpy(rng.normal(0, 0.1, tuple(param.shape))))
    for module in model.modules():
        if type(module).__name__ == "LlamaRMSNorm":
            module.forward = types.MethodType(fp64_rms_norm, module)
    rotary = model.model.rotary_emb
    rotary.forward = types.MethodType(fp64_rotary(torch, theta, hf_config.head_dim), rotary)
    return model, hf_config, rng


def hf_reference(seed=0, ignore=((1, 2),), **overrides):
    """(our config, HF state dict as arrays, input ids [T, B], targets [T, B], HF results)."""
    torch, _ = require_hf()
    model, hf_config, rng = hf_model(seed, **overrides)
    vocab = hf_config.vocab_size
    ids = rng.integers(0, vocab, (BATCH, SEQ))
    labels = ids.copy()
    for b, t in ignore:
        labels[b, t] = -100
    logits = model(input_ids=torch.from_numpy(ids)).logits
    # the shifted mean cross-entropy in fp64 (HF's own loss upcasts to fp32 only)
    loss = torch.nn.functional.cross_entropy(
        logits[:, :-1].reshape(-1, vocab), torch.from_numpy(labels[:, 1:]).reshape(-1),
        ignore_index=-100)
    loss.backward()
    results = {"logits": logits.detach().numpy().transpose(2, 1, 0),   # [V, T, B]
               "loss": loss.item(),
               "grads": {n: p.grad.numpy().copy() for n, p in model.named_parameters()}}
    state = {n: v.numpy().copy() for n, v in model.state_dict().items()}
    targets = np.full((SEQ, BATCH), -100, dtype=np.int64)
    targets[:-1] = labels[:, 1:].T
    return llama.LlamaConfig.from_hf(hf_config), state, ids.T.astype(np.int64), targets, \
        results


def run_ours(config, state, ids, targets, comm, distribution, tiles=None, device="auto"):
    """Compile Llama in fp64, load HF weights, execute once; (model, cg)."""
    model = llama.build_llama(config, batch=BATCH, seq=SEQ, dtype="fp64")
    tiling = nt.TilingStrategy.manual(tiles) if tiles else None
    cg = nt.compile(model.graph, comm=comm, tiling=tiling, distribution=distribution,
                    device=device)
    model.load_hf_state_dict(cg, state)
    cg.bind_data("input_ids", ids)
    cg.bind_data("targets", targets)
    cg.execute()
    cg.wait()
    return model, cg
