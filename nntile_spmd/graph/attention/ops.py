"""Graph layer: builders of attention (mask_scalar, mask_causal, scaled dot-product
attention and NNTile's flash attention names), re-exported by `nntile_spmd.ops`.

scaled_dot_product_attention is a composite: it adds ordinary ops (gemm, mask_scalar or
mask_causal, logsumexp, softmax_from_logsumexp, gemm), so it tiles, distributes and
differentiates through their rules, with no op that needs the key axis in one tile.
With mask="causal" its scores and probabilities are block-sparse (TensorNode.causal_dims):
the (key tile, query tile) blocks above the diagonal are never computed nor stored.

`flash_sdpa_fwd_cudnn` is `scaled_dot_product_attention` (same semantics, any tiling of
the key axis, every backend; NNTile's op is cuDNN-only). `flash_sdpa_bwd_cudnn` adds the
backward as ordinary ops that recompute the probabilities from q and k (flash attention
keeps no [Tk, Tq] matrix between forward and backward) and accumulate into the given
gradients.
"""

from __future__ import annotations

import math

from ..apply import apply
from ..checks import require_float, require_same_dtype
from ..reductions.ops import (logsumexp, softmax_from_logsumexp,
                              softmax_from_logsumexp_backward, sumprod_slice)
from ..registry import op_error

SDPA = "scaled_dot_product_attention"

CAUSAL = "causal"


def mask_scalar(mask, val, a, batch_ndim=0):
    """A = val where mask is False, in place (NNTile's mask_scalar).

    mask is a bool tensor shaped like A's leading dims (A.shape[:A.ndim - batch_ndim]),
    broadcast over A's trailing batch_ndim dims; its tiles follow A's tiling.
    """
    return apply("mask_scalar", [mask, a], [a], val=val, batch_ndim=batch_ndim)


def mask_causal(val, a):
    """A[key, query, batch...] = val where key > query, in place (a causal mask known when
    planning: only the tiles crossing the diagonal run a task)."""
    return apply("mask_causal", [a], [a], val=val)


def scaled_dot_product_attention(q, k, v, name, mask=None, scale=None, dropout=None):
    """Attention over [head_dim, T, batch...] tensors (GPT-2: [head_dim, T, B, heads]).

    S = scale * k^T q          [Tk, Tq, batch...]   (scale defaults to 1/sqrt(head_dim))
    S = -inf where mask is False (mask: bool [Tk, Tq], True = keep), if a mask is given;
        mask="causal" masks key > query structurally (Tk = Tq): the score and probability
        tiles whose every key exceeds every query are neither computed nor stored, and
        the results are bitwise those of the equivalent bool mask
    out = v softmax(S, axis 0) [v's head_dim, Tq, batch...], named `name`

    The softmax is logsumexp over the key axis then softmax_from_logsumexp, the
    online-softmax (flash) formulation over key tiles: the key axis may be split over
    tiles and ranks, partial logsumexps merging by logaddexp. Intermediates are named
    {name}_scores, {name}_lse and {name}_probs. `dropout`: a function probs -> probs
    applied before the probabilities weight v (training's attention dropout).
    """
    check_attention(q, k, v, mask)
    if scale is None:
        if not isinstance(q.shape[0], int):
            raise op_error(SDPA, "scale=None needs a concrete head_dim; pass scale", (q,))
        scale = 1.0 / math.sqrt(q.shape[0])
    batch_ndim = q.ndim - 2
    scores = attention_scores(q, k, f"{name}_scores", mask, scale)   # [Tk, Tq, batch...]
    lse = logsumexp(scores, f"{name}_lse", axis=0)                # [Tq, batch...]
    probs = attention_probs(lse, scores, f"{name}_probs")
    if dropout is not None:
        probs = dropout(probs)
    return apply("gemm", [v, probs], [name], ndim=1, batch_ndim=batch_ndim)


def attention_scores(q, k, name, mask, scale):
    """scale * k^T q, masked: with mask="causal" a block-sparse tensor (causal_dims)."""
    batch_ndim = q.ndim - 2
    scores = q.graph.tensor((k.shape[1], q.shape[1]) + q.shape[2:], name, q.dtype)
    if mask == CAUSAL:
        scores.causal_dims = (0, 1)
    apply("gemm", [k, q], [scores], alpha=float(scale), trans_a=True, ndim=1,
          batch_ndim=batch_ndim)
    if mask == CAUSAL:
        mask_causal(-math.inf, scores)
    elif mask is not None:
        mask_scalar(mask, -math.inf, scores, batch_ndim)
    return scores


def attention_probs(lse, scores, name):
    """softmax_from_logsumexp over the key axis, as block-sparse as the scores."""
    probs = scores.graph.tensor(scores.shape, name, scores.dtype)
    probs.causal_dims = scores.causal_dims
    return softmax_from_logsumexp(lse, scores, probs, axis=0)


def check_attention(q, k, v, mask):
    """Shapes and dtypes of q, k, v [d, T, batch...] and mask [Tk, Tq], before any op is added."""
    tensors = (q, k, v) if mask is None or isinstance(mask, str) else (q, k, v, mask)
    require_float(SDPA, q, k, v)
    require_same_dtype(SDPA, q, k, v)
    if q.ndim < 2 or not q.ndim == k.ndim == v.ndim:
        raise op_error(SDPA, "q, k and v must be [head_dim, T, batch...] with the same "
                       "number of dims", tensors)
    if k.shape[0] != q.shape[0]:
        raise op_error(SDPA, f"{q.name} and {k.name} must have the same head_dim (dim 0)",
                       tensors)
    if v.shape[1] != k.shape[1]:
        raise op_error(SDPA, f"{k.name} and {v.name} must have the same key length (dim 1)",
                       tensors)
    if not q.shape[2:] == k.shape[2:] == v.shape[2:]:
        raise op_error(SDPA, "q, k and v must have the same batch dims (dims 2...)", tensors)
    if isinstance(mask, str):
        if mask != CAUSAL:
            raise op_error(SDPA, f"mask={mask!r}: expected a bool tensor, None or "
                           f"{CAUSAL!r}", tensors)
        if k.shape[1] != q.shape[1]:
            raise op_error(SDPA, f'mask="causal" needs as many keys as queries '
                           f"({k.name} dim 1 != {q.name} dim 1)", tensors)
    elif mask is not None:
        if mask.dtype != "bool":
            raise op_error(SDPA, f"mask {mask.name} must be a bool tensor", tensors, TypeError)
        if mask.shape != (k.shape[1], q.shape[1]):
            raise op_error(SDPA, f"mask {mask.name} must be [Tk, Tq] = "
                           f"{[k.shape[1], q.shape[1]]}", tensors)


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
