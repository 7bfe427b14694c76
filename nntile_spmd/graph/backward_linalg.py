"""Graph layer: backward rules of gemm and transpose (rules_linalg.py), copy and cast
(rules_util.py) and embedding (rules_train.py). Each adds ordinary ops accumulating into
ctx.grad(input).
"""

from __future__ import annotations

from . import ops
from .backward_refusals import refuse_accumulating_output


def gemm_rule(op, ctx):
    a, b = op.inputs
    c = op.outputs[0]
    attrs = op.attrs
    refuse_accumulating_output(op, ctx)
    dc, alpha = ctx.grad(c), attrs["alpha"]
    trans_a, trans_b, batch_ndim = attrs["trans_a"], attrs["trans_b"], attrs["batch_ndim"]
    m_count = a.ndim - attrs["ndim"] - batch_ndim
    n_count = b.ndim - attrs["ndim"] - batch_ndim
    if ctx.needs(a):
        if trans_a:   # dA[K, M] = op(B)[K, N] . dC^T
            ops.gemm(b, dc, ctx.grad(a), alpha, 1.0, trans_b, True, n_count, batch_ndim)
        else:         # dA[M, K] = dC[M, N] . op(B)^T
            ops.gemm(dc, b, ctx.grad(a), alpha, 1.0, False, not trans_b, n_count, batch_ndim)
    if ctx.needs(b):
        if trans_b:   # dB[N, K] = dC^T . op(A)[M, K]
            ops.gemm(dc, a, ctx.grad(b), alpha, 1.0, True, trans_a, m_count, batch_ndim)
        else:         # dB[K, N] = op(A)^T . dC[M, N]
            ops.gemm(a, dc, ctx.grad(b), alpha, 1.0, not trans_a, False, m_count, batch_ndim)


def transpose_rule(op, ctx):
    (x,), (y,) = op.inputs, op.outputs
    if ctx.needs(x):
        back = ops.transpose(ctx.grad(y), ctx.temp(f"{x.name}_dtransposed"),
                             op.attrs["alpha"], y.ndim - op.attrs["ndim"])
        ops.add_inplace(1.0, back, 1.0, ctx.grad(x))


def copy_rule(op, ctx):
    (x,), (y,) = op.inputs, op.outputs
    if ctx.needs(x):
        source = ctx.grad(y)
        if op.op_type == "cast":
            source = ops.cast(source, x.dtype, ctx.temp(f"{x.name}_dcast"))
            if y.copy_of is not None:   # a parameter's compute copy: shard with its grad
                source.copy_of = ctx.grad(x).name
        ops.add_inplace(1.0, source, 1.0, ctx.grad(x))


def embedding_rule(op, ctx):
    index, vocab = op.inputs
    if ctx.needs(vocab):
        ops.embedding_backward(index, ctx.grad(op.outputs[0]), ctx.grad(vocab),
                               op.attrs["axis"])
