"""Models layer: the builder that adds Llama's tensors and ops to a LogicalGraph in HF's
order (models/llama.py has the config, the model and its HF weights' map): GPT-2's
builder with RMSNorm, rotary embeddings, grouped-query attention and a SwiGLU MLP.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..graph import ops
from ..graph.dtypes import storage_dtype
from .gpt2_builder import Builder

if TYPE_CHECKING:
    from .llama import LlamaConfig


def rope_tables(cfg: LlamaConfig, batch: int, seq: int) -> tuple:
    """(sin, cos) [head_dim/2, seq, batch] in float64: angle = position * theta^(-2i/head_dim)."""
    e = cfg.head_dim
    inverse_frequency = 1.0 / cfg.rope_theta ** (np.arange(0, e, 2, dtype=np.float64) / e)
    angle = inverse_frequency[:, None] * np.arange(seq, dtype=np.float64)[None, :]
    angle = np.repeat(angle[:, :, None], batch, axis=2)
    return np.asfortranarray(np.sin(angle)), np.asfortranarray(np.cos(angle))


class LlamaBuilder(Builder):
    """Adds Llama's tensors and ops to model.graph in HF's order (parameters and
    constants as GPT-2's builder declares them)."""

    def embeddings(self):
        cfg, model, graph = self.cfg, self.model, self.graph
        shape = [model.seq, model.batch]
        model.input_ids = graph.tensor(shape, "input_ids", "int64", external=True)
        model.targets = graph.tensor(shape, "targets", "int64", external=True)
        sin, cos = rope_tables(cfg, model.batch, model.seq)
        value_dtype = storage_dtype(self.dtype)
        self.sin = self.constant("rope_sin", sin.astype(value_dtype, order="F"), self.dtype)
        self.cos = self.constant("rope_cos", cos.astype(value_dtype, order="F"), self.dtype)
        self.mask = self.causal_mask()
        self.embed = self.param([cfg.hidden_size, cfg.vocab_size], "embed_tokens", tp_dim=1)
        return ops.embedding(model.input_ids, self.embed, "h_in", axis=0)

    def rms_norm(self, x, prefix):
        weight = self.param([self.cfg.hidden_size], f"{prefix}_weight")
        return ops.rms_norm(x, weight, f"{prefix}_out", axis=0, eps=self.cfg.rms_norm_eps)

    def block(self, layer, hidden):
        p = f"h{layer}"
        attended = self.attention(p, self.rms_norm(hidden, f"{p}_input_norm"))
        hidden = ops.add(1.0, hidden, 1.0, attended, f"{p}_attn_residual")
        mlp = self.mlp(p, self.rms_norm(hidden, f"{p}_post_norm"))
        return ops.add(1.0, hidden, 1.0, mlp, f"{p}_mlp_residual")

    def key_value(self, p, part, x, rotate):
        """[E, T, B, HEADS]: one key/value head per group, shared by its rep queries."""
        cfg = self.cfg
        kv, e, n = cfg.num_key_value_heads, cfg.head_dim, cfg.hidden_size
        weight = self.param([kv, e, n], f"{p}_{part}_weight", tp_dim=0)
        product = ops.gemm(weight, x, f"{p}_{part}_heads")                # [kv, E, T, B]
        moved = ops.transpose(product, f"{p}_{part}_moved", ndim=1)       # [E, T, B, kv]
        if cfg.rep == 1:
            return self.remember(p, part, ops.rope(self.sin, self.cos, moved, f"{p}_{part}")
                                 if rotate else moved)
        if rotate:
            moved = ops.rope(self.sin, self.cos, moved, f"{p}_{part}_rotated")
        return ops.scale_slice(1.0, self.remember(p, part, moved), f"{p}_{part}", axis=3,
                               size=cfg.rep)

    def attention(self, p, x):
        cfg = self.cfg
        heads, e, n = cfg.head_dims, cfg.head_dim, cfg.hidden_size
        kv_dim = len(heads) - 1   # the kv_heads dim of HEADS: tp splits whole groups
        q_weight = self.param([*heads, e, n], f"{p}_q_weight", tp_dim=kv_dim)
        product = ops.gemm(q_weight, x, f"{p}_q_heads")                  # [HEADS, E, T, B]
        moved = ops.transpose(product, f"{p}_q_moved", ndim=len(heads))   # [E, T, B, HEADS]
        q = ops.rope(self.sin, self.cos, moved, f"{p}_q")
        k = self.key_value(p, "k", x, rotate=True)
        v = self.key_value(p, "v", x, rotate=False)
        context = ops.scaled_dot_product_attention(
            q, k, v, f"{p}_context", mask=self.mask, scale=float(e ** -0.5),
            dropout=self.attention_dropout(p, cfg.attention_dropout))
        merged = ops.transpose(context, f"{p}_context_heads", ndim=3)    # [HEADS, E, T, B]
        o_weight = self.param([n, *heads, e], f"{p}_o_weight", tp_dim=1 + kv_dim)
        return ops.gemm(o_weight, merged, f"{p}_attn_out", ndim=len(heads) + 1)

    def mlp(self, p, x):
        cfg = self.cfg
        inner, n = cfg.intermediate_size, cfg.hidden_size
        gate_weight = self.param([inner, n], f"{p}_gate_weight", tp_dim=0)
        up_weight = self.param([inner, n], f"{p}_up_weight", tp_dim=0)
        down_weight = self.param([n, inner], f"{p}_down_weight", tp_dim=1)
        gate = ops.silu(ops.gemm(gate_weight, x, f"{p}_gate"), f"{p}_act")
        up = ops.gemm(up_weight, x, f"{p}_up")
        swiglu = ops.multiply(gate, up, f"{p}_swiglu")                    # SwiGLU
        return ops.gemm(down_weight, swiglu, f"{p}_mlp_out")

    def head(self, hidden):
        model, cfg = self.model, self.cfg
        normed = self.rms_norm(hidden, "norm")
        if cfg.tie_word_embeddings:   # logits = embed^T h; embed's gradient sums both uses
            logits = ops.gemm(self.embed, normed, "logits", trans_a=True)
        else:
            head = self.param([cfg.vocab_size, cfg.hidden_size], "lm_head", tp_dim=0)
            logits = ops.gemm(head, normed, "logits")
        model.logits = logits.mark_output()
        model.loss = ops.cross_entropy(model.logits, model.targets, "loss",
                                       ignore_index=-100).mark_output()
