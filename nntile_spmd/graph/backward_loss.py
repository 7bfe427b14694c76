"""Graph layer: backward rules of the losses (cross_entropy_lse in rules_loss.py,
cross_entropy_loss and mse_loss in rules_train.py). Each adds the loss's backward kernel,
accumulating into ctx.grad(input).
"""

from __future__ import annotations

from . import ops
from .backward_refusals import refuse_accumulating_output


def cross_entropy_rule(op, ctx):
    logits, labels = op.inputs
    if ctx.needs(logits):
        ops.cross_entropy_loss_backward(logits, labels, ctx.grad(op.outputs[0]),
                                        ctx.grad(logits), op.attrs["alpha"])


def cross_entropy_lse_rule(op, ctx):
    """dlogits += dloss/count * valid * (softmax(logits) - onehot(label)).

    lse gets no gradient on purpose: this is the total derivative of
    lse(logits) - logits[label], the path through lse = logsumexp(logits) included
    (its d lse / d logits is the softmax term).
    """
    logits, lse, labels, count = op.inputs
    loss = op.outputs[0]
    refuse_accumulating_output(op, ctx)
    if ctx.needs(logits):
        ops.cross_entropy_lse_backward(logits, lse, labels, count, ctx.grad(loss),
                                       ctx.grad(logits), op.attrs["ignore_index"])


def mse_rule(op, ctx):
    x, y = op.inputs
    dloss = ctx.grad(op.outputs[0])
    for tensor, other in ((x, y), (y, x)):
        if ctx.needs(tensor):   # d/dx sum((x - y)^2) = 2 (x - y), symmetric in sign
            ops.mse_loss_backward(tensor, other, dloss, ctx.grad(tensor), op.attrs["alpha"])
