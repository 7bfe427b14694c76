"""Shape and dtype rules of every op, checked against NumPy on random arrays.

Layout: a tensor of shape [m, n] binds to a NumPy array of shape (m, n), so the
NumPy expression of an op must give an array of exactly the output's shape.
"""

import numpy as np
import pytest

from nntile_spmd import LogicalGraph, ops
from nntile_spmd.graph.dtypes import storage_dtype
from nntile_spmd.graph.registry import REGISTRY

RNG = np.random.default_rng(0)

# Letters of the einsum oracle for gemm: M dims, K dims, N dims, batch dims.
M_DIMS, K_DIMS, N_DIMS, BATCH_DIMS = (2, 3), (4, 6), (5,), (7,)

GEMM_CASES = [  # trans_a, trans_b, ndim, batch_ndim
    (False, False, 1, 0),
    (False, False, 1, 1),
    (False, False, 2, 0),
    (False, False, 2, 1),
    (False, True, 1, 0),
    (False, True, 1, 1),
    (False, True, 2, 0),
    (False, True, 2, 1),
    (True, False, 1, 0),
    (True, False, 1, 1),
    (True, False, 2, 0),
    (True, False, 2, 1),
    (True, True, 1, 0),
    (True, True, 1, 1),
    (True, True, 2, 0),
    (True, True, 2, 1),
]


def gemm_layout(trans_a, trans_b, ndim, batch_ndim):
    """Einsum subscripts and shapes of A, B, C as docs/architecture.md states them."""
    m, k, n, b = "mp", "kq"[:ndim], "n", "b"[:batch_ndim]
    sizes = dict(zip("mpkqnb", M_DIMS + K_DIMS + N_DIMS + BATCH_DIMS))
    a_letters = (k + m if trans_a else m + k) + b
    b_letters = (n + k if trans_b else k + n) + b
    c_letters = m + n + b
    shapes = [tuple(sizes[c] for c in letters) for letters in (a_letters, b_letters)]
    return f"{a_letters},{b_letters}->{c_letters}", shapes


@pytest.mark.parametrize("trans_a, trans_b, ndim, batch_ndim", GEMM_CASES)
def test_gemm_shape_matches_einsum(trans_a, trans_b, ndim, batch_ndim):
    subscripts, (a_shape, b_shape) = gemm_layout(trans_a, trans_b, ndim, batch_ndim)
    g = LogicalGraph("gemm")
    a, b = g.tensor(a_shape, "a"), g.tensor(b_shape, "b")
    c = ops.gemm(a, b, "c", trans_a=trans_a, trans_b=trans_b, ndim=ndim,
                 batch_ndim=batch_ndim)
    expected = np.einsum(subscripts, RNG.random(a_shape), RNG.random(b_shape))
    assert c.shape == expected.shape
    assert c.dtype == "fp32"
    # The same C accumulated into (beta=1) must pass the rule again.
    ops.gemm(a, b, c, 1.0, 1.0, trans_a, trans_b, ndim, batch_ndim)
    assert [op.attrs["beta"] for op in g.ops()] == [0.0, 1.0]


def random_array(shape, dtype):
    """A random NumPy array for a graph tensor; indices stay in [0, 4)."""
    numpy_dtype = storage_dtype(dtype)
    if numpy_dtype.kind in "iu":
        return RNG.integers(0, 4, size=shape).astype(numpy_dtype)
    return RNG.random(shape).astype(numpy_dtype)


def logsumexp(x, axis):
    return np.log(np.sum(np.exp(x), axis=axis))


def softmax(x, axis):
    return np.exp(x) / np.sum(np.exp(x), axis=axis, keepdims=True)


def cross_entropy(logits, labels):
    log_probs = np.log(softmax(logits, 0))
    return -np.sum(np.take_along_axis(log_probs, labels[None], axis=0))


F32 = "fp32"
X345 = ([3, 4, 5], F32)
X34 = ([3, 4], F32)
SCALAR = ([], F32)
STEP = ([], "int64")
INDEX = ([6, 2], "int64")
VOCAB = ([8, 10], F32)            # [embed_dim, vocab_size]
LOGITS, LABELS = ([10, 6], F32), ([6], "int64")

# id, operand (shape, dtype) list, builder(t) -> output(s), NumPy oracle(*arrays) -> array(s)
RULE_CASES = [
    ("gelu", [X34], lambda t: ops.gelu(t[0], "y"), lambda x: x * 0.5),
    ("gelutanh", [X34], lambda t: ops.gelutanh(t[0], "y"), lambda x: np.tanh(x)),
    ("relu", [X34], lambda t: ops.relu(t[0], "y"), lambda x: np.maximum(x, 0)),
    ("silu", [X34], lambda t: ops.silu(t[0], "y"), lambda x: x / (1 + np.exp(-x))),
    ("sqrt", [X34], lambda t: ops.sqrt(t[0], "y"), lambda x: np.sqrt(x)),
    ("gelu_inplace", [X34], lambda t: ops.gelu_inplace(t[0]), lambda x: x),
    ("relu_inplace", [X345], lambda t: ops.relu_inplace(t[0]), lambda x: np.maximum(x, 0)),
    ("gelutanh_inplace", [X34], lambda t: ops.gelutanh_inplace(t[0]), np.tanh),
    ("silu_inplace", [X34], lambda t: ops.silu_inplace(t[0]), lambda x: x / (1 + np.exp(-x))),
    ("sqrt_inplace", [X34], lambda t: ops.sqrt_inplace(t[0]), np.sqrt),
    ("relu_backward", [X34] * 3, lambda t: ops.relu_backward(*t), lambda x, dy, dx: dx + dy),
    ("gelutanh_backward", [X34] * 3, lambda t: ops.gelutanh_backward(*t),
     lambda x, dy, dx: dx + dy),
    ("gelu_backward", [X34] * 3, lambda t: ops.gelu_backward(*t), lambda x, dy, dx: dx + dy),
    ("silu_backward", [X345] * 3, lambda t: ops.silu_backward(*t), lambda x, dy, dx: x * dy),
    ("softmax_backward", [X345] * 3, lambda t: ops.softmax_backward(*t, axis=1),
     lambda y, dy, dx: dx + y * dy),
    ("sqrt_backward", [X34] * 3, lambda t: ops.sqrt_backward(*t), lambda x, dy, dx: dy / x),
    ("add", [X345] * 2, lambda t: ops.add(1.0, t[0], 2.0, t[1], "z"), lambda x, y: x + 2 * y),
    ("add_0d", [SCALAR] * 2, lambda t: ops.add(1.0, t[0], 1.0, t[1], "z"), np.add),
    ("add_inplace", [X34] * 2, lambda t: ops.add_inplace(1.0, t[0], 0.5, t[1]), np.add),
    ("multiply", [X34] * 2, lambda t: ops.multiply(t[0], t[1], "z"), np.multiply),
    ("multiply_inplace", [X34] * 2, lambda t: ops.multiply_inplace(*t), np.multiply),
    ("scale", [X345], lambda t: ops.scale(t[0], "y", 3.0), lambda x: 3 * x),
    ("scale_inplace", [X345], lambda t: ops.scale_inplace(t[0], 3.0), lambda x: 3 * x),
    ("sum", [X345], lambda t: ops.sum(t[0], "s"), lambda x: np.sum(x)),
    ("sum_into", [X345, SCALAR], lambda t: ops.sum(t[0], t[1], beta=1.0),
     lambda x, s: np.sum(x) + s),
    ("sum_fiber_axis0", [X345], lambda t: ops.sum_fiber(t[0], "y", axis=0),
     lambda x: np.sum(x, axis=(1, 2))),
    ("sum_fiber_axis1", [X345], lambda t: ops.sum_fiber(t[0], "y", axis=1),
     lambda x: np.sum(x, axis=(0, 2))),
    ("sum_fiber_axis2", [X345], lambda t: ops.sum_fiber(t[0], "y", axis=2),
     lambda x: np.sum(x, axis=(0, 1))),
    ("sum_fiber_axis0_batch1", [X345], lambda t: ops.sum_fiber(t[0], "y", 0, 1),
     lambda x: np.sum(x, axis=1)),
    ("sum_fiber_axis1_batch1", [X345], lambda t: ops.sum_fiber(t[0], "y", 1, 1),
     lambda x: np.sum(x, axis=0)),
    ("sum_fiber_axis0_batch2", [X345], lambda t: ops.sum_fiber(t[0], "y", 0, 2), lambda x: x),
    ("add_fiber_axis1", [([4], F32), X345], lambda t: ops.add_fiber(1.0, t[0], 1.0, t[1], "z", 1),
     lambda f, x: x + f[None, :, None]),
    ("add_fiber_axis0_batch1", [([3, 5], F32), X345],
     lambda t: ops.add_fiber(1.0, t[0], 1.0, t[1], "z", axis=0, batch_ndim=1),
     lambda f, x: x + f[:, None, :]),
    ("add_fiber_inplace", [([5], F32), X345],
     lambda t: ops.add_fiber_inplace(1.0, t[0], 1.0, t[1], axis=2),
     lambda f, x: x + f[None, None, :]),
    ("softmax_axis0", [X345], lambda t: ops.softmax(t[0], "y", 0), lambda x: softmax(x, 0)),
    ("softmax_axis2", [X345], lambda t: ops.softmax(t[0], "y", 2), lambda x: softmax(x, 2)),
    ("logsumexp_axis1", [X345], lambda t: ops.logsumexp(t[0], "y", 1),
     lambda x: logsumexp(x, 1)),
    ("maxsumexp_axis1", [X345], lambda t: ops.maxsumexp(t[0], "y", 1),
     lambda x: np.stack([x.max(axis=1), np.sum(np.exp(x), axis=1)])),
    ("maxsumexp_axis0_1d", [([9], F32)], lambda t: ops.maxsumexp(t[0], "y", 0),
     lambda x: np.stack([x.max(axis=0), np.sum(np.exp(x), axis=0)])),
    ("transpose_ndim1", [X345], lambda t: ops.transpose(t[0], "y", ndim=1),
     lambda x: np.transpose(x, (1, 2, 0))),
    ("transpose_ndim2", [X345], lambda t: ops.transpose(t[0], "y", ndim=2),
     lambda x: np.transpose(x, (2, 0, 1))),
    ("transpose_ndim0", [X34], lambda t: ops.transpose(t[0], "y", ndim=0), lambda x: x),
    ("permute_021", [X345], lambda t: ops.permute(t[0], "y", (0, 2, 1)),
     lambda x: np.transpose(x, (0, 2, 1))),
    ("permute_rotation", [X345], lambda t: ops.permute(t[0], "y", [2, 0, 1], 0.5),
     lambda x: 0.5 * np.transpose(x, (2, 0, 1))),
    ("cast_fp64", [X34], lambda t: ops.cast(t[0], "fp64", "y"), lambda x: x.astype(np.float64)),
    ("cast_int32", [X34], lambda t: ops.cast(t[0], "int32", "y"), lambda x: x.astype(np.int32)),
    ("cast_bool_to_fp16", [([3], "bool")], lambda t: ops.cast(t[0], "fp16", "y"),
     lambda x: x.astype(np.float16)),
    ("copy_new", [X345], lambda t: ops.copy(t[0], "y"), np.copy),
    ("copy_into", [X34] * 2, lambda t: ops.copy(t[0], t[1]), lambda x, y: x.copy()),
    ("copy_int64", [INDEX], lambda t: ops.copy(t[0], "y"), np.copy),
    ("clear", [X345], lambda t: ops.clear(t[0]), np.zeros_like),
    ("clear_int64", [INDEX], lambda t: ops.clear(t[0]), np.zeros_like),
    ("fill", [X34], lambda t: ops.fill(t[0], 2.5), lambda x: np.full_like(x, 2.5)),
    ("add_scalar", [STEP], lambda t: ops.add_scalar(t[0]), lambda s: s + 1),
    ("embedding_axis0", [INDEX, VOCAB], lambda t: ops.embedding(*t, "e", axis=0),
     lambda index, vocab: vocab[:, index]),
    ("embedding_axis1", [INDEX, VOCAB], lambda t: ops.embedding(*t, "e", axis=1),
     lambda index, vocab: np.moveaxis(vocab[:, index], 0, 1)),
    ("embedding_axis2", [INDEX, VOCAB], lambda t: ops.embedding(*t, "e", axis=2),
     lambda index, vocab: np.moveaxis(vocab[:, index], 0, 2)),
    ("embedding_backward", [INDEX, ([8, 6, 2], F32), VOCAB],
     lambda t: ops.embedding_backward(*t), lambda index, dy, dvocab: dvocab),
    ("cross_entropy", [LOGITS, LABELS], lambda t: ops.cross_entropy_loss(*t, "loss"),
     cross_entropy),
    ("cross_entropy_backward", [LOGITS, LABELS, SCALAR, LOGITS],
     lambda t: ops.cross_entropy_loss_backward(*t), lambda logits, *rest: softmax(logits, 0)),
    ("mse", [X345] * 2, lambda t: ops.mse_loss(*t, "loss"), lambda x, y: np.sum((x - y) ** 2)),
    ("mse_backward", [X345, X345, SCALAR, X345], lambda t: ops.mse_loss_backward(*t),
     lambda x, y, dl, dx: dx + 2 * dl * (x - y)),
    ("sumprod_slice_axis1", [X345] * 2, lambda t: ops.sumprod_slice(*t, "z", axis=1),
     lambda x, y: np.sum(x * y, axis=1)),
    ("sumprod_slice_into", [X345, X345, ([3, 4], F32)],
     lambda t: ops.sumprod_slice(t[0], t[1], t[2], axis=2, beta=1.0),
     lambda x, y, z: z + np.sum(x * y, axis=2)),
    ("logsumexp_into", [X345, ([3, 5], F32)],
     lambda t: ops.logsumexp(t[0], t[1], axis=1, beta=1.0),
     lambda x, y: np.logaddexp(y, logsumexp(x, 1))),
    ("logsumexp_backward", [X345, ([3, 5], F32), ([3, 5], F32), X345],
     lambda t: ops.logsumexp_backward(*t, axis=1),
     lambda x, y, dy, dx: dx + np.exp(x - y[:, None]) * dy[:, None]),
    ("sumprod_slice_backward", [([4, 5], F32), X345, X345],
     lambda t: ops.sumprod_slice_backward(*t, axis=0), lambda s, x, dx: dx + s[None] * x),
    ("sum_slice_axis0", [X345], lambda t: ops.sum_slice(t[0], "s", axis=0),
     lambda x: np.sum(x, axis=0)),
    ("sum_slice_into", [X345, X34], lambda t: ops.sum_slice(t[0], t[1], axis=2, beta=1.0),
     lambda x, s: s + np.sum(x, axis=2)),
    ("add_slice_axis1", [([3, 5], F32), X345],
     lambda t: ops.add_slice(1.0, t[0], 1.0, t[1], "z", axis=1), lambda s, x: s[:, None] + x),
    ("add_slice_inplace", [([4, 5], F32), X345],
     lambda t: ops.add_slice_inplace(1.0, t[0], 1.0, t[1], axis=0), lambda s, x: s[None] + x),
    ("multiply_slice", [X34, X345], lambda t: ops.multiply_slice(t[0], t[1], "z", axis=2),
     lambda s, x: s[:, :, None] * x),
    ("multiply_fiber_axis1", [([4], F32), X345],
     lambda t: ops.multiply_fiber(t[0], t[1], "z", axis=1), lambda f, x: f[None, :, None] * x),
    ("multiply_fiber_batch", [([3, 5], F32), X345],
     lambda t: ops.multiply_fiber(t[0], t[1], "z", axis=0, batch_ndim=1),
     lambda f, x: f[:, None, :] * x),
    ("sumprod_fiber_axis2", [X345] * 2, lambda t: ops.sumprod_fiber(t[0], t[1], "f", axis=2),
     lambda x, y: np.sum(x * y, axis=(0, 1))),
    ("sumprod_fiber_into_batch", [X345, X345, ([4, 5], F32)],
     lambda t: ops.sumprod_fiber(t[0], t[1], t[2], axis=1, batch_ndim=1, beta=1.0),
     lambda x, y, f: f + np.sum(x * y, axis=0)),
    ("sumprod_fiber_backward", [([4], F32), X345, X345],
     lambda t: ops.sumprod_fiber_backward(*t, axis=1), lambda f, x, dx: dx + f[:, None] * x),
    ("pow", [X34], lambda t: ops.pow(t[0], "y", 2.0, -0.5), lambda x: 2.0 * x ** -0.5),
    ("pow_inplace", [X345], lambda t: ops.pow_inplace(t[0], exp=3.0), lambda x: x ** 3),
    ("pow_backward", [X34] * 3, lambda t: ops.pow_backward(*t, exp=2.0),
     lambda x, dy, dx: dx + 2 * x * dy),
    ("softmax_from_logsumexp", [([3, 5], F32), X345],
     lambda t: ops.softmax_from_logsumexp(*t, "y", axis=1), lambda lse, x: softmax(x, 1)),
    ("softmax_from_logsumexp_backward", [X345, X345, ([3, 4], F32), X345],
     lambda t: ops.softmax_from_logsumexp_backward(*t, axis=2),
     lambda y, dy, d, dx: dx + y * (dy - d[..., None])),
    ("rope", [([2, 4], F32), ([2, 4], F32), ([4, 4, 5], F32)],
     lambda t: ops.rope(*t, "y"), lambda sin, cos, x: x.copy()),
    ("rope_backward", [([2, 4], F32), ([2, 4], F32), ([4, 4, 5], F32), ([4, 4, 5], F32)],
     lambda t: ops.rope_backward(*t), lambda sin, cos, dy, dx: dx),
    ("scale_slice", [X34], lambda t: ops.scale_slice(2.0, t[0], "y", axis=1, size=5),
     lambda x: 2 * np.repeat(x[:, None], 5, axis=1)),
    ("mask_scalar", [([3, 4], "bool"), X345],
     lambda t: ops.mask_scalar(t[0], -np.inf, t[1], batch_ndim=1),
     lambda mask, x: np.where(mask[..., None], x, -np.inf).astype(np.float32)),
    ("mask_causal", [X345], lambda t: ops.mask_causal(-np.inf, t[0]),
     lambda x: np.where((np.arange(3)[:, None] > np.arange(4))[..., None], -np.inf,
                        x).astype(np.float32)),
    ("valid_count", [LABELS], lambda t: ops.valid_count(t[0], "n", dtype="fp64"),
     lambda labels: np.float64(np.count_nonzero(labels != -100))),
    ("cross_entropy_lse", [LOGITS, ([6], F32), LABELS, SCALAR],
     lambda t: ops.cross_entropy_lse(*t, "loss"),
     lambda logits, lse, labels, count: np.float32(cross_entropy(logits, labels))),
    ("cross_entropy_lse_backward", [LOGITS, ([6], F32), LABELS, SCALAR, SCALAR, LOGITS],
     lambda t: ops.cross_entropy_lse_backward(*t), lambda logits, *rest: softmax(logits, 0)),
    ("sgd_step", [STEP, X34, X34, X34], lambda t: ops.sgd_step(*t),
     lambda step, grad, param, velocity: (param - grad, velocity)),
    ("adam_step", [STEP, X345, X345, X345, X345], lambda t: ops.adam_step(*t),
     lambda step, grad, param, m, v: (param - grad, m + grad, v + grad ** 2)),
    ("adamw_step", [STEP, X34, X34, X34, X34], lambda t: ops.adamw_step(*t, lr=0.1),
     lambda step, grad, param, m, v: (param - grad, m + grad, v + grad ** 2)),
    # elementwise ops and reductions along axes (graph/elementwise, graph/reductions)
    ("tanh", [X34], lambda t: ops.tanh(t[0], "y"), np.tanh),
    ("tanh_inplace", [X34], lambda t: ops.tanh_inplace(t[0]), np.tanh),
    ("tanh_backward", [X34] * 3, lambda t: ops.tanh_backward(*t), lambda x, dy, dx: dx + dy),
    ("sigmoid", [X345], lambda t: ops.sigmoid(t[0], "y"), lambda x: 1 / (1 + np.exp(-x))),
    ("sigmoid_inplace", [X34], lambda t: ops.sigmoid_inplace(t[0]), lambda x: x),
    ("sigmoid_backward", [X34] * 3, lambda t: ops.sigmoid_backward(*t),
     lambda x, dy, dx: dx + dy),
    ("sub", [X345] * 2, lambda t: ops.sub(t[0], t[1], "z"), np.subtract),
    ("div", [X34] * 2, lambda t: ops.div(t[0], t[1], "z"), np.divide),
    ("hypot", [X345] * 2, lambda t: ops.hypot(1.0, t[0], 2.0, t[1], "z"),
     lambda x, y: np.hypot(x, 2 * y)),
    ("hypot_inplace", [X34] * 2, lambda t: ops.hypot_inplace(1.0, t[0], 1.0, t[1]), np.hypot),
    ("hypot_backward", [X34] * 4, lambda t: ops.hypot_backward(*t),
     lambda x, z, dz, dx: dx + x * dz),
    ("hypot_scalar_inverse", [X34], lambda t: ops.hypot_scalar_inverse(1e-3, 1.0, t[0]),
     lambda x: 1 / np.hypot(x, 1e-3)),
    ("max_axis1", [X345], lambda t: ops.max(t[0], "y", axes=1), lambda x: x.max(axis=1)),
    ("min_axis2", [X345], lambda t: ops.min(t[0], "y", axes=2), lambda x: x.min(axis=2)),
    ("mean_axis0", [X345], lambda t: ops.mean(t[0], "y", axes=0), lambda x: x.mean(axis=0)),
    ("extremum_count", [X345, ([3, 5], F32)], lambda t: ops.extremum_count(*t, "c", axis=1),
     lambda x, y: (x == y[:, None]).sum(axis=1).astype(np.float32)),
    ("extremum_backward", [X345, X34, X34, X34, X345],
     lambda t: ops.extremum_backward(*t, axis=2), lambda x, y, c, dy, dx: dx),
    ("norm_slice", [X345], lambda t: ops.norm_slice(2.0, t[0], "y", axis=0),
     lambda x: 2 * np.sqrt((x * x).sum(axis=0))),
    ("norm_slice_inplace", [X345, ([3, 5], F32)],
     lambda t: ops.norm_slice_inplace(1.0, t[0], 1.0, t[1], axis=1),
     lambda x, y: np.hypot(np.sqrt((x * x).sum(axis=1)), y)),
    ("norm_slice_backward", [X345, ([4, 5], F32), ([4, 5], F32), X345],
     lambda t: ops.norm_slice_backward(*t, axis=0), lambda x, y, dy, dx: dx),
    ("scale_fiber", [([4], F32)], lambda t: ops.scale_fiber(2.0, t[0], "y", 1, shape=(3, 4, 5)),
     lambda f: np.broadcast_to(2 * f[None, :, None], (3, 4, 5))),
    ("norm_fiber", [X345], lambda t: ops.norm_fiber(1.0, t[0], "y", axis=0, batch_ndim=1),
     lambda x: np.sqrt((x * x).sum(axis=1))),
    ("norm_fiber_inplace", [X345, ([4], F32)],
     lambda t: ops.norm_fiber_inplace(1.0, t[0], 1.0, t[1], axis=1),
     lambda x, y: np.hypot(np.sqrt((x * x).sum(axis=(0, 2))), y)),
    ("norm_fiber_backward", [X345, ([4], F32), ([4], F32), X345],
     lambda t: ops.norm_fiber_backward(*t, axis=1), lambda x, y, dy, dx: dx),
    ("sum_backward", [SCALAR, X345], lambda t: ops.sum_backward(*t), lambda dy, dx: dx + dy),
    ("randn", [X345], lambda t: ops.randn(t[0], 3), lambda x: x),
    ("dropout", [X345], lambda t: ops.dropout(t[0], "y", 0.5, 3), lambda x: x),
    # data movement (graph/data_movement)
    ("slice", [X345], lambda t: ops.slice(t[0], "y", 1, 1, 3), lambda x: x[:, 1:3]),
    ("slice_backward", [X345, ([3, 9, 5], F32)],
     lambda t: ops.slice_backward(t[0], t[1], 1, 2), lambda dy, dx: dx),
    ("reshape", [X345], lambda t: ops.reshape(t[0], "y", [12, 5]),
     lambda x: x.reshape(12, 5, order="F")),
    ("gather", [X345], lambda t: ops.gather(t[0], "y"), lambda x: x),
    ("scatter", [X345], lambda t: ops.scatter(t[0], "y"), lambda x: x),
    ("log_scalar", [SCALAR], lambda t: ops.log_scalar(t[0], "y"), lambda x: x),
    ("conv2d_inplace", [([5, 4, 3, 2], F32), ([3, 2, 3, 4], F32)],
     lambda t: ops.conv2d(t[0], t[1], "y"),   # [i, j, c, b, p, q] windows . [p, q, c, o]
     lambda x, c: np.einsum("ijcbpq,pqco->ijob",
                            np.lib.stride_tricks.sliding_window_view(x, (3, 2), (0, 1)), c)),
    ("conv2d_bwd_input_inplace", [([3, 3, 4, 2], F32), ([3, 2, 3, 4], F32), ([5, 4, 3, 2], F32)],
     lambda t: ops.conv2d_bwd_input_inplace(1.0, t[0], t[1], 0.0, t[2]), lambda dy, c, dx: dx),
    ("conv2d_bwd_weight_inplace", [([5, 4, 3, 2], F32), ([3, 3, 4, 2], F32), ([3, 2, 3, 4], F32)],
     lambda t: ops.conv2d_bwd_weight_inplace(1.0, t[0], t[1], 0.0, t[2]), lambda x, dy, dc: dc),
    ("copy_intersection", [([4, 3], F32), ([5, 2], F32)],
     lambda t: ops.copy_intersection(t[0], (1, 0), t[1], (0, 1)), lambda src, dst: dst),
]


@pytest.mark.parametrize("case_id, operands, build, oracle", RULE_CASES,
                         ids=[case[0] for case in RULE_CASES])
def test_rule_matches_numpy(case_id, operands, build, oracle):
    g = LogicalGraph(case_id)
    tensors = [g.tensor(shape, f"t{i}", dtype) for i, (shape, dtype) in enumerate(operands)]
    arrays = [random_array(tuple(shape), dtype) for shape, dtype in operands]
    with np.errstate(all="ignore"):
        expected = oracle(*arrays)
    outputs = build(tensors)
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    expected = expected if isinstance(expected, tuple) else (expected,)
    assert [out.shape for out in outputs] == [np.shape(want) for want in expected]
    assert [storage_dtype(out.dtype) for out in outputs] == \
        [np.asarray(want).dtype for want in expected]
    assert g.num_operations() == 1
    assert g.ops()[0].outputs == outputs


def test_every_registered_op_has_a_rule_case():
    covered = {g_op for case in RULE_CASES for g_op in built_op_types(case)} | {"gemm"}
    assert set(REGISTRY) - covered == set()


def built_op_types(case):
    """Op types the builder of one RULE_CASES line adds."""
    case_id, operands, build, _ = case
    g = LogicalGraph(case_id)
    build([g.tensor(shape, f"t{i}", dtype) for i, (shape, dtype) in enumerate(operands)])
    return [op.op_type for op in g.ops()]
