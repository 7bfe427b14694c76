"""Graph layer: free-function op builders with NNTile's seed signatures.

Each builder creates its output tensors from the op's shape rule and calls
LogicalGraph.add_op, which validates. Exposed to users as `nntile_spmd.ops`.
"""

from __future__ import annotations

from .apply import apply, owner_graph  # noqa: F401 - ops.apply is the generic builder
from .ops_conv import (conv2d, conv2d_bwd_input_inplace,  # noqa: F401
                       conv2d_bwd_weight_inplace, conv2d_inplace, copy_intersection)
from .ops_attention import mask_causal, mask_scalar, scaled_dot_product_attention  # noqa: F401
from .ops_loss import (cross_entropy, cross_entropy_lse, cross_entropy_lse_backward,  # noqa: F401
                       valid_count)
from .ops_norm import (layer_norm, multiply_fiber, pow, pow_backward,  # noqa: F401
                       pow_inplace, sumprod_fiber, sumprod_fiber_backward)
from .ops_math import (div, extremum_backward, extremum_count, hypot,  # noqa: F401
                      hypot_backward, hypot_inplace, hypot_scalar_inverse, max, mean, min,
                      norm_fiber, norm_fiber_backward, norm_fiber_inplace, norm_slice,
                      norm_slice_backward, norm_slice_inplace, randn, dropout, scale_fiber, sub,
                      sum_backward)
from .ops_total_sum import total_sum_accum  # noqa: F401
from .ops_batch_norm import batch_norm  # noqa: F401
from .ops_flash import flash_sdpa_bwd_cudnn, flash_sdpa_fwd_cudnn  # noqa: F401
from .ops_data import (concat, gather, log_scalar, reshape, scatter, slice,  # noqa: F401
                       slice_backward)
from .ops_rope import rms_norm, rope, rope_backward, scale_slice  # noqa: F401
from .ops_slice import (add_slice, add_slice_inplace, logsumexp, logsumexp_backward,  # noqa: F401
                        multiply_slice, softmax_from_logsumexp, softmax_from_logsumexp_backward,
                        sum_slice, sumprod_slice, sumprod_slice_backward)


# -- elementwise ---------------------------------------------------------------
def _unary(op_type):
    def forward(x, name):
        return apply(op_type, [x], [name])

    def inplace(x):
        return apply(f"{op_type}_inplace", [x], [x])

    def backward(x, dy, dx):
        return apply(f"{op_type}_backward", [x, dy], [dx])

    forward.__doc__ = f"y = {op_type}(x), a new tensor named `name`."
    inplace.__doc__ = f"x = {op_type}(x) in place."
    backward.__doc__ = f"dx += {op_type}'(x) * dy."
    return forward, inplace, backward


gelu, gelu_inplace, gelu_backward = _unary("gelu")
gelutanh, gelutanh_inplace, gelutanh_backward = _unary("gelutanh")
relu, relu_inplace, relu_backward = _unary("relu")
silu, silu_inplace, silu_backward = _unary("silu")
sqrt, sqrt_inplace, sqrt_backward = _unary("sqrt")
tanh, tanh_inplace, tanh_backward = _unary("tanh")
sigmoid, sigmoid_inplace, sigmoid_backward = _unary("sigmoid")


def add(alpha, x, beta, y, name):
    """z = alpha*x + beta*y."""
    return apply("add", [x, y], [name], alpha=alpha, beta=beta)


def add_inplace(alpha, x, beta, y):
    """y = alpha*x + beta*y."""
    return apply("add_inplace", [x, y], [y], alpha=alpha, beta=beta)


def multiply(x, y, name, alpha=1.0):
    """z = alpha*x*y."""
    return apply("multiply", [x, y], [name], alpha=alpha)


def multiply_inplace(x, y, alpha=1.0):
    """y = alpha*x*y."""
    return apply("multiply_inplace", [x, y], [y], alpha=alpha)


def scale(x, name, alpha=1.0):
    """y = alpha*x."""
    return apply("scale", [x], [name], alpha=alpha)


def scale_inplace(x, alpha=1.0):
    """x = alpha*x."""
    return apply("scale_inplace", [x], [x], alpha=alpha)


# -- matrix ops ----------------------------------------------------------------
def gemm(a, b, c_or_name, alpha=1.0, beta=0.0, trans_a=False, trans_b=False, ndim=1,
         batch_ndim=0):
    """C = alpha*op(A)op(B) (new tensor named c_or_name) or, given C, + beta*C."""
    return apply("gemm", [a, b], [c_or_name], alpha=alpha, beta=beta, trans_a=trans_a,
                 trans_b=trans_b, ndim=ndim, batch_ndim=batch_ndim)


def transpose(x, name, alpha=1.0, ndim=1):
    """y = alpha * x with its first `ndim` dims moved to the end."""
    return apply("transpose", [x], [name], alpha=alpha, ndim=ndim)


# -- reductions and fibers -----------------------------------------------------
def sum(x, y, alpha=1.0, beta=0.0):  # noqa: A001 - seed name
    """y (0-d) = alpha*sum(x) + beta*y; y may be a name (then beta must be 0)."""
    return apply("sum", [x], [y], alpha=alpha, beta=beta)


def sum_fiber(x, y, axis=0, batch_ndim=0, redux=0, alpha=1.0, beta=0.0):
    """y = alpha * sum of x over all dims but `axis` and the batch dims + beta*y."""
    return apply("sum_fiber", [x], [y], axis=axis, batch_ndim=batch_ndim, redux=redux,
                 alpha=alpha, beta=beta)


def add_fiber(alpha, x, beta, y, name, axis=0, batch_ndim=0):
    """z = alpha * x (a fiber along `axis`) broadcast + beta*y (bias add)."""
    return apply("add_fiber", [x, y], [name], axis=axis, batch_ndim=batch_ndim,
                 alpha=alpha, beta=beta)


def add_fiber_inplace(alpha, x, beta, y, axis=0, batch_ndim=0):
    """y = alpha * x (a fiber along `axis`) broadcast + beta*y."""
    return apply("add_fiber_inplace", [x, y], [y], axis=axis, batch_ndim=batch_ndim,
                 alpha=alpha, beta=beta)


def softmax(x, name, axis=0):
    """y = softmax of x along `axis`."""
    return apply("softmax", [x], [name], axis=axis)


def softmax_backward(y, grad_output, grad_x, axis=0):
    """grad_x += y * (grad_output - sum(y * grad_output along axis)), y = softmax(x)."""
    return apply("softmax_backward", [y, grad_output], [grad_x], axis=axis)


def maxsumexp(x, name, axis=0):
    """y[0] = max along `axis`, y[1] = sum(exp(x - max)) along `axis`."""
    return apply("maxsumexp", [x], [name], axis=axis)


# -- utility -------------------------------------------------------------------
def clear(x):
    """x = 0."""
    return apply("clear", [], [x])


def fill(x, value=0.0):
    """x = value everywhere."""
    return apply("fill", [], [x], value=value)


def add_scalar(x, value=1):
    """x += value (used for step counters)."""
    return apply("add_scalar", [], [x], value=value)


def copy(x, y):
    """y = x; y may be a name (a new tensor) or an existing tensor."""
    return apply("copy", [x], [y])


def cast(x, dtype, name):
    """y = x converted to `dtype`, the only dtype conversion."""
    return apply("cast", [x], [name], dtype=dtype)


# -- embedding, losses, optimizers ---------------------------------------------
def embedding(index, vocab, name, axis=0):
    """y = vocab columns picked by `index`, the embed dim inserted at `axis`."""
    return apply("embedding", [index, vocab], [name], axis=axis)


def embedding_backward(index, grad_output, grad_vocab, axis=0):
    """grad_vocab[:, index] += grad_output (accumulates)."""
    return apply("embedding_backward", [index, grad_output], [grad_vocab], axis=axis)


def cross_entropy_loss(logits, labels, name, alpha=1.0):
    """loss = alpha * sum over the batch of -log softmax(logits)[label]."""
    return apply("cross_entropy_loss", [logits, labels], [name], alpha=alpha)


def cross_entropy_loss_backward(logits, labels, grad_loss, grad_logits, alpha=1.0):
    """grad_logits += alpha * grad_loss * (softmax(logits) - onehot(labels))."""
    return apply("cross_entropy_loss_backward", [logits, labels, grad_loss],
                 [grad_logits], alpha=alpha)


def mse_loss(x, y, name, alpha=1.0):
    """loss = alpha * sum((x - y)^2)."""
    return apply("mse_loss", [x, y], [name], alpha=alpha)


def mse_loss_backward(x, y, grad_loss, grad_x, alpha=1.0):
    """grad_x += 2 * alpha * grad_loss * (x - y)."""
    return apply("mse_loss_backward", [x, y, grad_loss], [grad_x], alpha=alpha)


def sgd_step(step, grad, param, velocity, lr=1e-2, momentum=0.0, weight_decay=0.0,
             dampening=0.0, nesterov=False):
    """PyTorch SGD update of param (and velocity) at 1-based step `step`."""
    return apply("sgd_step", [step, grad], [param, velocity], lr=lr, momentum=momentum,
                 weight_decay=weight_decay, dampening=dampening, nesterov=nesterov)


def adam_step(step, grad, param, m, v, lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8,
              weight_decay=0.0):
    """PyTorch Adam update of param, m, v at 1-based step `step`."""
    return apply("adam_step", [step, grad], [param, m, v], lr=lr, beta1=beta1,
                 beta2=beta2, eps=eps, weight_decay=weight_decay)


def adamw_step(step, grad, param, m, v, lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8,
               weight_decay=1e-2):
    """PyTorch AdamW update (decoupled weight decay) of param, m, v."""
    return apply("adamw_step", [step, grad], [param, m, v], lr=lr, beta1=beta1,
                 beta2=beta2, eps=eps, weight_decay=weight_decay)
