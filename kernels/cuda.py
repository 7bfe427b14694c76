"""The cuda kernel table: CuPy array expressions mirroring kernels.reference on GPU tiles.

Arrays only: imports CuPy (>= 12, for ufunc.at), never nntile_spmd or mpi4py. Nothing
here synchronizes the stream but the embedding id check (see there): scalars that live
in tiles (step counters, dloss) stay on the device and enter the expressions as 0-d arrays.
"""

import math

try:
    import cupy as cp
    from cupyx.scipy.special import erf, expit
except ImportError as error:  # only this backend needs CuPy
    raise ImportError(
        "kernels.cuda needs CuPy with a working CUDA install (e.g. `pip install cupy-cuda12x`); "
        "use kernels.get_kernels('cpu') on machines without an NVIDIA GPU"
    ) from error

from . import KERNEL_NAMES
from .cuda_norm import (multiply_fiber, pow, pow_backward, sumprod_fiber,  # noqa: F401
                        sumprod_fiber_backward)  # in KERNELS
from .cuda_math import MATH_KERNELS
from .cuda_rope import rope, rope_backward, scale_slice  # noqa: F401 - in KERNELS
from .cuda_slice import (add_slice, cross_entropy_lse, cross_entropy_lse_backward,  # noqa: F401
                         logsumexp, logsumexp_backward, logsumexp_merge, mask_scalar,
                         multiply_slice, softmax_from_logsumexp, softmax_from_logsumexp_backward,
                         sum_slice, sumprod_slice, sumprod_slice_backward,
                         valid_count)  # in KERNELS
from .errors import vocab_error
from .layout import gemm_folds

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_RSQRT2 = 1.0 / math.sqrt(2.0)
_RSQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_GELU_TANH_CUBIC = 0.044715


def _store(out, value, beta, previous):
    """out = value + beta*previous, never reading `previous` when beta == 0 (may be garbage)."""
    if beta == 0.0:
        out[...] = value
    else:
        out[...] = value + beta * previous


def _wide(dtype):
    """Dtype that products and scatter-adds are carried in: fp16 is widened to fp32."""
    return cp.float32 if dtype == cp.float16 else dtype


# ---------------------------------------------------------------- products


def _batch_first(x, shape3, trans):
    """F-order (rows, cols, batch) view of a gemm operand as (batch, op rows, op cols)."""
    return x.reshape(shape3, order="F").transpose((2, 1, 0) if trans else (2, 0, 1))


def gemm(a, b, c, *, alpha=1.0, beta=0.0, trans_a=False, trans_b=False, ndim=1, batch_ndim=0):
    """c = alpha*op(a)·op(b) + beta*c with NNTile's multi-dim and batch rules (cuBLAS matmul)."""
    a3, b3, _ = gemm_folds(a.shape, b.shape, trans_a, trans_b, ndim, batch_ndim)
    product = cp.matmul(_batch_first(a, a3, trans_a), _batch_first(b, b3, trans_b))
    product = product.transpose(1, 2, 0).reshape(c.shape, order="F")  # (m, n, batch)
    _store(c, alpha * product, beta, c)


def transpose(x, y, *, alpha=1.0, ndim):
    """y = alpha * x with its first `ndim` dims moved to the end."""
    order = tuple(range(ndim, x.ndim)) + tuple(range(ndim))
    y[...] = alpha * cp.transpose(x, order)


# ---------------------------------------------------------------- elementwise


def add(x, y, z, *, alpha, beta):
    """z = alpha*x + beta*y (y is not read when beta == 0)."""
    _store(z, alpha * x, beta, y)


def multiply(x, y, z, *, alpha=1.0):
    """z = alpha*x*y."""
    z[...] = alpha * x * y


def scale(x, y, *, alpha):
    """y = alpha*x."""
    y[...] = alpha * x


def add_scalar(x, *, value):
    """x += value in place (also on int64 step counters)."""
    x[...] = x + value  # assignment casts, so an int64 counter takes a float value too


def fill(x, *, value):
    """x[...] = value."""
    x.fill(value)


def clear(x):
    """x[...] = 0."""
    x.fill(0)


def copy(x, y):
    """y = x."""
    cp.copyto(y, x)


def cast(x, y):
    """y = x converted to y.dtype."""
    cp.copyto(y, x, casting="unsafe")


def gelu(x, y):
    """y = 0.5*x*(1 + erf(x/sqrt(2)))."""
    y[...] = 0.5 * x * (1.0 + erf(x * _RSQRT2))


def gelutanh(x, y):
    """y = 0.5*x*(1 + tanh(sqrt(2/pi)*(x + 0.044715*x^3)))."""
    y[...] = 0.5 * x * (1.0 + cp.tanh(_SQRT_2_OVER_PI * (x + _GELU_TANH_CUBIC * x * x * x)))


def relu(x, y):
    """y = max(x, 0)."""
    y[...] = cp.maximum(x, 0)


def silu(x, y):
    """y = x*sigmoid(x)."""
    y[...] = x * expit(x)


def sqrt(x, y):
    """y = sqrt(x)."""
    y[...] = cp.sqrt(x)


def gelu_backward(x, dy, dx):
    """dx += gelu'(x)*dy."""
    cdf = 0.5 * (1.0 + erf(x * _RSQRT2))
    pdf = cp.exp(-0.5 * x * x) * _RSQRT_2PI
    dx += (cdf + x * pdf) * dy


def gelutanh_backward(x, dy, dx):
    """dx += gelutanh'(x)*dy."""
    t = cp.tanh(_SQRT_2_OVER_PI * (x + _GELU_TANH_CUBIC * x * x * x))
    inner = _SQRT_2_OVER_PI * (1.0 + 3.0 * _GELU_TANH_CUBIC * x * x)
    dx += (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * inner) * dy


def relu_backward(x, dy, dx):
    """dx += (x > 0)*dy."""
    dx += cp.where(x > 0, dy, 0)


def silu_backward(x, dy, dx):
    """dx += sigmoid(x)*(1 + x*(1 - sigmoid(x)))*dy."""
    s = expit(x)
    dx += s * (1.0 + x * (1.0 - s)) * dy


def sqrt_backward(x, dy, dx):
    """dx += dy/(2*sqrt(x))."""
    dx += dy / (2.0 * cp.sqrt(x))


# ---------------------------------------------------------------- reductions


def sum(x, y, *, alpha=1.0, beta=0.0):  # noqa: A001 - the kernel's name in every table
    """y (0-d) = alpha*sum(x) + beta*y."""
    _store(y, alpha * x.sum(dtype=cp.float64), beta, y)


def _fiber_axes(ndim, axis, batch_ndim):
    """Axes a fiber kernel reduces or broadcasts over: all but `axis` and the batch dims."""
    return tuple(i for i in range(ndim - batch_ndim) if i != axis)


def sum_fiber(x, y, *, axis, batch_ndim=0, alpha=1.0, beta=0.0):
    """y[j, batch] = alpha*sum of x over all dims but `axis` and the batch dims + beta*y."""
    total = x.sum(axis=_fiber_axes(x.ndim, axis, batch_ndim), dtype=cp.float64)
    _store(y, alpha * total, beta, y)


def add_fiber(x, y, z, *, axis, batch_ndim=0, alpha=1.0, beta=0.0):
    """z = alpha*x (broadcast along all dims but `axis` and the batch dims) + beta*y."""
    expanded = cp.expand_dims(x, _fiber_axes(y.ndim, axis, batch_ndim))
    _store(z, alpha * expanded, beta, y)


def softmax(x, y, *, axis):
    """y = exp(x - max) / sum(exp(x - max)) along `axis`."""
    shifted = cp.exp(x - x.max(axis=axis, keepdims=True))
    y[...] = shifted / shifted.sum(axis=axis, keepdims=True)


def softmax_backward(y, dy, dx, *, axis):
    """dx += y * (dy - sum(y * dy along `axis`)), the backward of y = softmax(x)."""
    dx += y * (dy - (y * dy).sum(axis=axis, keepdims=True))


def maxsumexp(x, y, *, axis):
    """y[0] = max along `axis`, y[1] = sum(exp(x - max)) along `axis`."""
    top = x.max(axis=axis, keepdims=True)
    y[0] = cp.squeeze(top, axis=axis)
    y[1] = cp.exp(x - top).sum(axis=axis)


# ---------------------------------------------------------------- losses


def _log_softmax_parts(logits):
    """(max over classes, logsumexp over classes) of logits [C, B...], keepdims on axis 0."""
    top = logits.max(axis=0, keepdims=True)
    return top, top + cp.log(cp.exp(logits - top).sum(axis=0, keepdims=True))


def cross_entropy(logits, labels, loss, *, alpha=1.0, beta=0.0):
    """loss = alpha*sum_b(logsumexp(logits[:, b]) - logits[labels[b], b]) + beta*loss."""
    _, lse = _log_softmax_parts(logits)
    picked = cp.take_along_axis(logits, labels[cp.newaxis], axis=0)
    _store(loss, alpha * (lse - picked).sum(dtype=cp.float64), beta, loss)


def cross_entropy_backward(logits, labels, dloss, dlogits, *, alpha=1.0):
    """dlogits += alpha*dloss*(softmax(logits, axis 0) - onehot(labels))."""
    _, lse = _log_softmax_parts(logits)
    classes = cp.arange(logits.shape[0]).reshape((-1,) + (1,) * labels.ndim)
    dlogits += (alpha * dloss) * (cp.exp(logits - lse) - (classes == labels))


def mse(x, y, loss, *, alpha=1.0, beta=0.0):
    """loss (0-d) = alpha*sum((x - y)^2) + beta*loss."""
    diff = x - y
    _store(loss, alpha * (diff * diff).sum(dtype=cp.float64), beta, loss)


def mse_backward(x, y, dloss, dx, *, alpha=1.0):
    """dx += 2*alpha*dloss*(x - y)."""
    dx += (2.0 * alpha * dloss) * (x - y)


# ---------------------------------------------------------------- embedding
# Ids of other vocab tiles are masked with where() rather than boolean indexing, which
# would need the hit count on the host (a stream synchronization). Ids outside the whole
# vocabulary must stop the run, so _check_ids does synchronize, once per index tile: the
# one deliberate sync in this module (the alternative is training on zero vectors).


def _check_ids(kernel, index, vocab_size):
    bad = (index < 0) | (index >= vocab_size)
    if bad.any():   # host sync
        raise vocab_error(kernel, index[bad].ravel()[0], vocab_size)


def embedding(index, vocab, y, *, axis, vocab_size, vocab_offset=0, beta=0.0):
    """y = beta*y + vocab columns of the in-range indices, the E axis at position `axis`;
    ids outside the vocabulary [0, vocab_size) raise."""
    _check_ids("embedding", index, vocab_size)
    local = index - vocab_offset
    hit = (local >= 0) & (local < vocab.shape[1])
    rows = cp.where(hit, vocab[:, cp.where(hit, local, 0)], 0)  # (E,) + index.shape
    _store(y, cp.moveaxis(rows, 0, axis), beta, y)


def embedding_backward(index, dy, dvocab, *, axis, vocab_size, vocab_offset=0, beta=0.0):
    """dvocab = beta*dvocab + scatter-add of dy's E-vectors into columns index - vocab_offset;
    ids outside the vocabulary [0, vocab_size) raise."""
    _check_ids("embedding_backward", index, vocab_size)
    local = index - vocab_offset
    hit = (local >= 0) & (local < dvocab.shape[1])
    # (E,) + index.shape with the misses zeroed, and (Vt, E): one row per vocab column.
    vectors = cp.where(hit, cp.moveaxis(dy, axis, 0), 0)
    rows = cp.zeros(dvocab.shape[::-1], _wide(dvocab.dtype))
    # Misses add zeros into row 0; both flattenings below are C order, so they pair up.
    cp.add.at(rows, cp.where(hit, local, 0).ravel(), vectors.reshape(dvocab.shape[0], -1).T)
    _store(dvocab, rows.T, beta, dvocab)


# ---------------------------------------------------------------- optimizers


def sgd_step(
    step,
    grad,
    param,
    velocity,
    *,
    lr,
    momentum=0.0,
    weight_decay=0.0,
    dampening=0.0,
    nesterov=False,
):
    """PyTorch SGD; `step` (0-d int64) is the 1-based step, velocity is not read at step 1."""
    g = grad + weight_decay * param
    if momentum != 0.0:
        # where() picks g at step 1 without letting uninitialized velocity through.
        velocity[...] = cp.where(step == 1, g, momentum * velocity + (1.0 - dampening) * g)
        g = g + momentum * velocity if nesterov else velocity
    param -= lr * g


def _adam(step, grad, param, m, v, lr, beta1, beta2, eps, l2, decay):
    """Adam moments and update after param *= decay; m and v are not read at step 1."""
    t = step.astype(cp.float64)
    first = step == 1
    g = grad + l2 * param if l2 != 0.0 else grad  # each skipped term saves a tile pass
    if decay != 1.0:
        param *= decay
    m[...] = cp.where(first, (1.0 - beta1) * g, beta1 * m + (1.0 - beta1) * g)
    v[...] = cp.where(first, (1.0 - beta2) * g * g, beta2 * v + (1.0 - beta2) * g * g)
    # Bias corrections are 0-d device arrays; cast so the tile math stays in its dtype.
    m_scale = (1.0 / (1.0 - beta1**t)).astype(param.dtype)
    v_scale = (1.0 / (1.0 - beta2**t)).astype(param.dtype)
    param -= lr * (m * m_scale) / (cp.sqrt(v * v_scale) + eps)


def adam_step(step, grad, param, m, v, *, lr, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0):
    """PyTorch Adam with L2 weight decay added to the gradient."""
    _adam(step, grad, param, m, v, lr, beta1, beta2, eps, weight_decay, 1.0)


def adamw_step(step, grad, param, m, v, *, lr, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0):
    """PyTorch AdamW: param *= 1 - lr*weight_decay, then the Adam update without L2."""
    _adam(step, grad, param, m, v, lr, beta1, beta2, eps, 0.0, 1.0 - lr * weight_decay)


KERNELS = {name: MATH_KERNELS[name] if name in MATH_KERNELS else globals()[name]
           for name in KERNEL_NAMES}
