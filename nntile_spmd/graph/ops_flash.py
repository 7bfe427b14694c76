"""Graph layer: NNTile's flash attention names, re-exported by `nntile_spmd.ops`.

`flash_sdpa_fwd_cudnn` is `scaled_dot_product_attention` (same semantics: the tiled
online-softmax formulation, any tiling of the key axis, every backend; NNTile's op is
cuDNN-only). `flash_sdpa_bwd_cudnn` adds the backward as ordinary ops that recompute
the probabilities from q and k (flash attention keeps no [Tk, Tq] matrix between
forward and backward) and accumulate into the given gradients.
"""

from __future__ import annotations

import math

from .apply import apply
from .ops_attention import (attention_probs, attention_scores, check_attention,
                            scaled_dot_product_attention)
from .ops_slice import logsumexp, softmax_from_logsumexp_backward, sumprod_slice
from .registry import op_error

flash_sdpa_fwd_cudnn = scaled_dot_product_attention
BWD = "flash_sdpa_bwd_cudnn"
BWD_PARTS = ("scores", "lse", "probs", "dprobs", "dot", "dscores")


def flash_sdpa_bwd_cudnn(q, k, v, grad_out, grad_q, grad_k, grad_v, name, mask=None,
                         scale=None):
    """grad_q, grad_k, grad_v += the gradients of out = flash_sdpa_fwd_cudnn(q, k, v, mask,
    scale) given grad_out = d loss / d out. Intermediates are named f"{name}_{part}" for
    part in BWD_PARTS."""
    check_attention(q, k, v, mask)
    check_gradients(q, k, v, grad_out, grad_q, grad_k, grad_v, name)
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[0])
    batch_ndim = q.ndim - 2
    parts = {part: f"{name}_{part}" for part in BWD_PARTS}
    scores = attention_scores(q, k, parts["scores"], mask, scale)   # [Tk, Tq, batch...]
    lse = logsumexp(scores, parts["lse"], axis=0)
    probs = attention_probs(lse, scores, parts["probs"])
    # dv += grad_out probs^T; dprobs = v^T grad_out
    apply("gemm", [grad_out, probs], [grad_v], alpha=1.0, beta=1.0, trans_b=True, ndim=1,
          batch_ndim=batch_ndim)
    # with mask="causal" the [Tk, Tq] gradients are block-sparse like the probabilities
    dprobs = q.graph.tensor(scores.shape, parts["dprobs"], q.dtype)
    dscores = q.graph.tensor(scores.shape, parts["dscores"], q.dtype)
    dprobs.causal_dims = dscores.causal_dims = scores.causal_dims
    apply("gemm", [v, grad_out], [dprobs], trans_a=True, ndim=1, batch_ndim=batch_ndim)
    # softmax's backward over the key axis (masked entries have probs = 0: no gradient)
    dot = sumprod_slice(probs, dprobs, parts["dot"], axis=0)
    apply("clear", [], [dscores])
    softmax_from_logsumexp_backward(probs, dprobs, dot, dscores, axis=0)
    # scores = scale k^T q: dq += scale k dscores, dk += scale q dscores^T
    apply("gemm", [k, dscores], [grad_q], alpha=float(scale), beta=1.0, ndim=1,
          batch_ndim=batch_ndim)
    apply("gemm", [q, dscores], [grad_k], alpha=float(scale), beta=1.0, trans_b=True,
          ndim=1, batch_ndim=batch_ndim)
    return grad_q, grad_k, grad_v


def check_gradients(q, k, v, grad_out, grad_q, grad_k, grad_v, name):
    """Each gradient is shaped like its tensor; grad_out like the attention's output."""
    tensors = (q, k, v, grad_out, grad_q, grad_k, grad_v)
    out_shape = (v.shape[0],) + q.shape[1:]
    for grad, like, shape in ((grad_out, "the output", out_shape), (grad_q, q.name, q.shape),
                              (grad_k, k.name, k.shape), (grad_v, v.name, v.shape)):
        if grad.shape != shape:
            raise op_error(BWD, f"{grad.name} must have shape {list(shape)} (that of "
                           f"{like})", tensors)
        if grad.dtype != q.dtype:
            raise op_error(BWD, f"{grad.name} must have {q.name}'s dtype", tensors, TypeError)
    if not isinstance(q.shape[0], int):
        raise op_error(BWD, "needs a concrete head_dim", tensors)
    taken = [f"{name}_{part}" for part in BWD_PARTS if q.graph.has_tensor(f"{name}_{part}")]
    if taken:
        raise op_error(BWD, f"tensor name {taken[0]!r} is already in use", tensors)
