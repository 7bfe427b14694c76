"""Models layer: the builder that adds GPT-2's tensors and ops to a LogicalGraph in HF's
order (models/gpt2.py has the config, the model and its HF weights' map; Llama's builder
extends this one).

Every projection is a gemm whose weight is laid out [out..., in...]; the weights carry
their tensor-parallel marks (heads, MLP inner dim, vocabulary); under mixed precision
the attention and MLP read casts of their weights (to_compute) and hand their results
back to the residual stream in the master dtype (to_master).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..graph import ops
from ..graph.scalars import DROPOUT_ON, DROPOUT_STEP, Scalar

if TYPE_CHECKING:
    from .gpt2 import GPT2

# GPT2Config.activation_function -> the builder of the MLP's activation
ACTIVATIONS = {"gelu_new": ops.gelutanh, "gelu_pytorch_tanh": ops.gelutanh,
               "gelu": ops.gelu, "relu": ops.relu, "silu": ops.silu}
ATTENTION_MASKS = ("causal", "tensor")


class Builder:
    """Adds GPT-2's tensors and ops to model.graph in HF's order (Llama's builder
    shares its parameter and constant helpers)."""

    def __init__(self, model: GPT2, attention_mask: str = "causal"):
        self.model, self.graph, self.cfg = model, model.graph, model.config
        self.dtype = model.dtype
        if attention_mask not in ATTENTION_MASKS:
            raise ValueError(f"attention_mask={attention_mask!r}: expected one of "
                             f"{ATTENTION_MASKS}")
        self.attention_mask = attention_mask
        self.dropout_sites = 0

    def dropout(self, x, p, name):
        """x through dropout of probability p when the model is built with dropout (off
        until a training step switches it on: DROPOUT_ON), else x itself. Each site draws
        its own masks (its seed), a new one every step (DROPOUT_STEP)."""
        if not self.model.dropout or p == 0:
            return x
        self.dropout_sites += 1
        return ops.dropout(x, name, p=Scalar(DROPOUT_ON, 0.0, float(p)),
                           seed=self.dropout_sites, step=Scalar(DROPOUT_STEP, 0.0))

    def remember(self, p, part, tensor):
        """The keys or values attention reads, given this step's: here the same tensor;
        a decoder (models/generation.py) appends them to its cache and returns the cache."""
        return tensor

    def causal_mask(self):
        """The attention's mask: "causal", known when planning (the blocks above the
        diagonal are skipped), or "tensor": the same mask as a bool constant
        causal_mask [key, query] (every block computed, then masked)."""
        if self.attention_mask == "causal":
            return "causal"
        seq = self.model.seq
        keep = np.arange(seq)[:, None] <= np.arange(seq)[None, :]        # [key, query]
        return self.constant("causal_mask", np.asfortranarray(keep), "bool")

    def param(self, shape, name, tp_dim=None, compute=False):
        """A parameter (the master weight); with `compute`, what the block reads of it:
        under mixed precision its cast to the compute dtype."""
        tensor = self.graph.tensor(shape, name, self.dtype, requires_grad=True,
                                   persistent=True)
        if tp_dim is not None:
            tensor.split_for_tp(tp_dim)
        self.model.params.append(tensor)
        return self.to_compute(tensor) if compute else tensor

    def to_compute(self, x):
        """x cast to the compute dtype (x itself without mixed precision). Autodiff casts
        the gradient back, so a master weight's gradient stays in the master dtype."""
        compute = self.model.compute_dtype
        if compute is None or compute == x.dtype:
            return x
        copy = ops.cast(x, compute, f"{x.name}_{compute}")
        if x.role == "parameter":
            copy.copy_of = x.name
        if x.parallel_dim is not None:
            copy.split_for_tp(x.parallel_dim)
        return copy

    def to_master(self, x):
        """x cast back to the master dtype (the residual stream's)."""
        return x if x.dtype == self.dtype else ops.cast(x, self.dtype, f"{x.name}_{self.dtype}")

    def constant(self, name, value, dtype):
        tensor = self.graph.tensor(list(value.shape), name, dtype, persistent=True,
                                   external=True)
        self.model.constants[name] = value
        return tensor

    def embeddings(self):
        cfg, model, graph = self.cfg, self.model, self.graph
        shape = [model.seq, model.batch]
        model.input_ids = graph.tensor(shape, "input_ids", "int64", external=True)
        model.targets = graph.tensor(shape, "targets", "int64", external=True)
        positions = np.asfortranarray(np.repeat(np.arange(model.seq)[:, None],
                                                model.batch, axis=1).astype(np.int64))
        position_ids = self.constant("position_ids", positions, "int64")
        self.mask = self.causal_mask()
        self.wte = self.param([cfg.n_embd, cfg.vocab_size], "wte", tp_dim=1)
        wpe = self.param([cfg.n_embd, cfg.n_positions], "wpe")
        tokens = ops.embedding(model.input_ids, self.wte, "token_embeddings", axis=0)
        places = ops.embedding(position_ids, wpe, "position_embeddings", axis=0)
        return self.dropout(ops.add(1.0, tokens, 1.0, places, "h_in"), cfg.embd_pdrop,
                            "h_in_dropout")

    def layer_norm(self, x, prefix):
        n = self.cfg.n_embd
        weight = self.param([n], f"{prefix}_weight")
        bias = self.param([n], f"{prefix}_bias")
        return self.to_compute(ops.layer_norm(x, weight, bias, f"{prefix}_out", axis=0,
                                              eps=self.cfg.layer_norm_epsilon))

    def linear(self, x, weight, bias, name, ndim=1):
        product = ops.gemm(weight, x, f"{name}_product", ndim=ndim)
        return ops.add_fiber(1.0, bias, 1.0, product, name, axis=0)

    def block(self, layer, hidden):
        p = f"h{layer}"
        normed = self.layer_norm(hidden, f"{p}_ln_1")
        attended = self.attention(p, normed)
        hidden = ops.add(1.0, hidden, 1.0, attended, f"{p}_attn_residual")
        normed = self.layer_norm(hidden, f"{p}_ln_2")
        mlp = self.mlp(p, normed)
        return ops.add(1.0, hidden, 1.0, mlp, f"{p}_mlp_residual")

    def attention(self, p, x):
        cfg = self.cfg
        heads, head_dim, n = cfg.n_head, cfg.head_dim, cfg.n_embd
        per_head = {}
        for part in ("q", "k", "v"):
            weight = self.param([heads, head_dim, n], f"{p}_{part}_weight", tp_dim=0,
                                compute=True)
            bias = self.param([head_dim, heads], f"{p}_{part}_bias", tp_dim=1, compute=True)
            product = ops.gemm(weight, x, f"{p}_{part}_heads")           # [H, E, T, B]
            moved = ops.transpose(product, f"{p}_{part}_moved", ndim=1)   # [E, T, B, H]
            per_head[part] = ops.add_fiber(1.0, bias, 1.0, moved, f"{p}_{part}", axis=0,
                                           batch_ndim=1)
        for part in ("k", "v"):
            per_head[part] = self.remember(p, part, per_head[part])
        scale = 1.0 / np.sqrt(head_dim) if cfg.scale_attn_weights else 1.0
        context = ops.scaled_dot_product_attention(
            per_head["q"], per_head["k"], per_head["v"], f"{p}_context", mask=self.mask,
            scale=float(scale), dropout=self.attention_dropout(p, cfg.attn_pdrop))  # [E, T, B, H]
        merged = ops.transpose(context, f"{p}_context_heads", ndim=3)     # [H, E, T, B]
        weight = self.param([n, heads, head_dim], f"{p}_attn_proj_weight", tp_dim=1,
                            compute=True)
        bias = self.param([n], f"{p}_attn_proj_bias", compute=True)
        return self.dropout(self.to_master(self.linear(merged, weight, bias, f"{p}_attn_out",
                                                       ndim=2)), cfg.resid_pdrop,
                            f"{p}_attn_dropout")

    def attention_dropout(self, p, probability):
        """What scaled_dot_product_attention applies to its probabilities (None: nothing)."""
        if not self.model.dropout or probability == 0:
            return None
        return lambda probs: self.dropout(probs, probability, f"{p}_probs_dropout")

    def mlp(self, p, x):
        cfg = self.cfg
        fc_weight = self.param([cfg.inner, cfg.n_embd], f"{p}_fc_weight", tp_dim=0,
                               compute=True)
        fc_bias = self.param([cfg.inner], f"{p}_fc_bias", tp_dim=0, compute=True)
        proj_weight = self.param([cfg.n_embd, cfg.inner], f"{p}_proj_weight", tp_dim=1,
                                 compute=True)
        proj_bias = self.param([cfg.n_embd], f"{p}_proj_bias", compute=True)
        inner = self.linear(x, fc_weight, fc_bias, f"{p}_fc")
        activated = ACTIVATIONS[cfg.activation_function](inner, f"{p}_act")
        return self.dropout(self.to_master(self.linear(activated, proj_weight, proj_bias,
                                                       f"{p}_mlp_out")), cfg.resid_pdrop,
                            f"{p}_mlp_dropout")

    def head(self, hidden):
        model = self.model
        normed = self.layer_norm(hidden, "ln_f")
        # the tied lm_head: logits[V, T, B] = wte^T h; wte's gradient sums both uses
        if model.compute_dtype in (None, model.dtype):
            model.logits = ops.gemm(self.wte, normed, "logits", trans_a=True).mark_output()
        else:   # the head's gemm in the compute dtype, the loss's softmax in the master's
            product = ops.gemm(self.to_compute(self.wte), normed,
                               f"logits_{model.compute_dtype}", trans_a=True)
            model.logits = ops.cast(product, model.dtype, "logits").mark_output()
        model.loss = ops.cross_entropy(model.logits, model.targets, "loss",
                                       ignore_index=-100).mark_output()
