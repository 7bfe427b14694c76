"""Graph layer: reverse-mode autodiff that emits ordinary backward ops into the graph.

BACKWARD_RULES maps an op type to a rule(op, ctx) that adds ops accumulating into
ctx.grad(input) from ctx.grad(output). Gradients of `wrt` are persistent tensors
that accumulate (+=) across executes, so micro-batch accumulation works; clear
them after the optimizer step (train.optim does).
"""

from __future__ import annotations

from . import ops
from .backward_norm import NORM_BACKWARD_RULES
from .backward_rope import ROPE_BACKWARD_RULES
from .backward_math import MATH_BACKWARD_RULES
from .backward_inplace import INPLACE_BACKWARD_RULES
from .backward_data import DATA_BACKWARD_RULES
from .backward_refusals import refuse_accumulating_output
from .ops_conv import CONV_BACKWARD_RULES


class GradContext:
    """Creates gradient tensors on first use (cleared, then accumulated into)."""

    def __init__(self, graph, needed, wrt_grads):
        self.graph, self.needed, self.grads = graph, needed, dict(wrt_grads)

    def needs(self, tensor) -> bool:
        return tensor.name in self.needed

    def grad(self, tensor):
        if tensor.name not in self.grads:
            grad = self.graph.tensor(tensor.shape, unique_name(self.graph, tensor.name + "_grad"),
                                     tensor.dtype)
            grad.grad_of = tensor.name
            ops.clear(grad)
            self.grads[tensor.name] = grad
        return self.grads[tensor.name]

    def has_grad(self, tensor) -> bool:
        return tensor.name in self.grads

    def temp(self, like_name):
        return unique_name(self.graph, like_name)


def unique_name(graph, base: str) -> str:
    name, index = base, 1
    while graph.has_tensor(name):
        name, index = f"{base}{index}", index + 1
    return name


def grad(graph, loss, wrt, accumulate: bool = True):
    """Add backward ops for d(sum of loss)/d(wrt); return the gradient tensors.

    The gradients are persistent outputs (role "gradient") added to on every
    execute; with accumulate=False they are cleared at the start of backward.
    """
    wrt = list(wrt)
    forward_ops = graph.ops()
    needed = reaching(forward_ops, {t.name for t in wrt}, forward=True) & \
        reaching(forward_ops, {loss.name}, forward=False)
    with graph.phase("backward"):
        wrt_grads = {}
        for tensor in wrt:
            grad_tensor = graph.tensor(tensor.shape, unique_name(graph, tensor.name + "_grad"),
                                       tensor.dtype, persistent=True)
            grad_tensor.grad_of = tensor.name
            grad_tensor.mark_output()
            if not accumulate:
                ops.clear(grad_tensor)
            wrt_grads[tensor.name] = grad_tensor
        context = GradContext(graph, needed, wrt_grads)
        seed = graph.tensor(loss.shape, unique_name(graph, loss.name + "_grad"), loss.dtype)
        ops.fill(seed, 1.0)
        context.grads[loss.name] = seed
        for op in reversed(forward_ops):
            if any(context.has_grad(t) for t in op.outputs) and \
                    any(context.needs(t) for t in op.inputs):
                rule = BACKWARD_RULES.get(op.op_type)
                if rule is None:
                    raise NotImplementedError(f"grad: op {op.name} ({op.op_type}) has no "
                                              "backward rule")
                rule(op, context)
    return [wrt_grads[t.name] for t in wrt]


def reaching(op_list, start: set, forward: bool) -> set:
    """Tensor names reachable from `start` along ops (forward or backward)."""
    reached = set(start)
    for op in (op_list if forward else reversed(op_list)):
        sources, targets = (op.inputs, op.outputs) if forward else (op.outputs, op.inputs)
        if any(t.name in reached for t in sources):
            reached.update(t.name for t in targets)
    return reached


# -- rules -------------------------------------------------------------------------
def unary_rule(op, ctx):
    (x,), (y,) = op.inputs, op.outputs
    if ctx.needs(x):
        ops.apply(f"{op.op_type}_backward", [x, ctx.grad(y)], [ctx.grad(x)])


def add_rule(op, ctx):
    x, y = op.inputs
    dz = ctx.grad(op.outputs[0])
    for tensor, coefficient in ((x, op.attrs["alpha"]), (y, op.attrs["beta"])):
        if ctx.needs(tensor) and coefficient != 0:
            ops.add_inplace(coefficient, dz, 1.0, ctx.grad(tensor))


def multiply_rule(op, ctx):
    x, y = op.inputs
    dz = ctx.grad(op.outputs[0])
    for tensor, other in ((x, y), (y, x)):
        if ctx.needs(tensor):
            product = ops.multiply(dz, other, ctx.temp(f"{tensor.name}_dprod"),
                                   alpha=op.attrs["alpha"])
            ops.add_inplace(1.0, product, 1.0, ctx.grad(tensor))


def scale_rule(op, ctx):
    (x,), (y,) = op.inputs, op.outputs
    if ctx.needs(x):
        ops.add_inplace(op.attrs["alpha"], ctx.grad(y), 1.0, ctx.grad(x))


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


def softmax_rule(op, ctx):
    (x,), (y,) = op.inputs, op.outputs
    if ctx.needs(x):
        ops.softmax_backward(y, ctx.grad(y), ctx.grad(x), op.attrs["axis"])


def sumprod_slice_rule(op, ctx):
    x, y = op.inputs
    attrs = op.attrs
    z = op.outputs[0]
    refuse_accumulating_output(op, ctx)
    dz = ctx.grad(z)
    for tensor, other in ((x, y), (y, x)):   # x is y (a sum of squares) gets both terms
        if ctx.needs(tensor):
            ops.sumprod_slice_backward(dz, other, ctx.grad(tensor), attrs["axis"],
                                       attrs["alpha"])


def logsumexp_rule(op, ctx):
    (x,), (y,) = op.inputs, op.outputs
    refuse_accumulating_output(op, ctx)
    if ctx.needs(x):
        ops.logsumexp_backward(x, y, ctx.grad(y), ctx.grad(x), op.attrs["axis"])


def mask_scalar_rule(op, ctx):
    """Zero the masked entries of grad(A), in place.

    mask_scalar works in place and gradients are keyed by tensor name, so ctx.grad(A)
    stands both for d/d(A after masking) and d/d(A before masking). Rules run in
    reverse program order: when this one runs, every reader of the masked A has
    already accumulated into ctx.grad(A), and the op that produced A before masking
    runs its rule afterwards and reads ctx.grad(A). The masked entries were
    overwritten by val and no longer depend on the old A, the kept ones are passed
    through unchanged, so zeroing the masked entries turns the first gradient into
    exactly the second.
    """
    mask, a = op.inputs
    if ctx.needs(a):
        ops.mask_scalar(mask, 0.0, ctx.grad(a), op.attrs["batch_ndim"])


def softmax_from_logsumexp_rule(op, ctx):
    """dx += y * (dy - sum over axis of y*dy): softmax's total derivative.

    The input lse is logsumexp(x) by contract, so lse gets no gradient: its path,
    -y * sum(y*dy), is already the second term here. The sum runs over the axis's
    tiles (sumprod_slice), so the axis may stay split.
    """
    lse, x = op.inputs
    (y,) = op.outputs
    if ctx.needs(x):
        axis, dy = op.attrs["axis"], ctx.grad(y)
        dot = ops.sumprod_slice(y, dy, ctx.temp(f"{y.name}_dot_grad"), axis)
        ops.softmax_from_logsumexp_backward(y, dy, dot, ctx.grad(x), axis)


def sum_fiber_rule(op, ctx):
    (x,), (y,) = op.inputs, op.outputs
    if ctx.needs(x):
        ops.add_fiber_inplace(op.attrs["alpha"], ctx.grad(y), 1.0, ctx.grad(x),
                              op.attrs["axis"], op.attrs["batch_ndim"])


def add_fiber_rule(op, ctx):
    fiber, full = op.inputs
    dz = ctx.grad(op.outputs[0])
    if ctx.needs(full) and op.attrs["beta"] != 0:
        ops.add_inplace(op.attrs["beta"], dz, 1.0, ctx.grad(full))
    if ctx.needs(fiber):
        ops.sum_fiber(dz, ctx.grad(fiber), op.attrs["axis"], op.attrs["batch_ndim"],
                      alpha=op.attrs["alpha"], beta=1.0)


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


BACKWARD_RULES = {
    **NORM_BACKWARD_RULES,   # slice and fiber ops, pow (backward_norm.py)
    **ROPE_BACKWARD_RULES,   # rope, scale_slice (backward_rope.py)
    **MATH_BACKWARD_RULES,   # seed elementwise ops and reductions (backward_math.py)
    **INPLACE_BACKWARD_RULES,   # in-place forms (backward_inplace.py)
    **DATA_BACKWARD_RULES,   # slice, concat's parts, gather, scatter, reshape (backward_data.py)
    **CONV_BACKWARD_RULES,   # conv2d_inplace (ops_conv.py)
    **{name: unary_rule for name in ("gelu", "gelutanh", "relu", "silu", "sqrt")},
    "add": add_rule,
    "multiply": multiply_rule,
    "scale": scale_rule,
    "gemm": gemm_rule,
    "softmax": softmax_rule,
    "sum_fiber": sum_fiber_rule,
    "sumprod_slice": sumprod_slice_rule,
    "logsumexp": logsumexp_rule,
    "mask_scalar": mask_scalar_rule,
    "softmax_from_logsumexp": softmax_from_logsumexp_rule,
    "add_fiber": add_fiber_rule,
    "transpose": transpose_rule,
    "copy": copy_rule,
    "cast": copy_rule,
    "embedding": embedding_rule,
    "cross_entropy_loss": cross_entropy_rule,
    "cross_entropy_lse": cross_entropy_lse_rule,
    "mse_loss": mse_rule,
}
