"""The op cases the runtime suites run against NumPy, one line each (see helpers.OpCase).

Used by test_runtime_ops.py (SimulatedWorld, hypothesis) and test_runtime_mpi.py
(real MPI ranks, fixed tables).
"""
# ruff: noqa: E501 - the case table keeps one case per line, however long

import numpy as np
from helpers import OpCase, gelu, layer_norm, logsumexp, relu, silu, softmax
from scipy.special import erf

from nntile_kernels import reference
from nntile_spmd import ops

E = np.einsum


def randn_numpy(shape, **params):
    """The whole tensor randn writes, from the reference kernel (a counter-based hash)."""
    out = np.empty(shape, order="F")
    reference.KERNELS["randn"](out, **params)
    return out


def gelu_grad(x):
    return 0.5 * (1.0 + erf(x / np.sqrt(2.0))) + x * np.exp(-x * x / 2) / np.sqrt(2 * np.pi)


def silu_grad(x):
    s = 1.0 / (1.0 + np.exp(-x))
    return s * (1.0 + x * (1.0 - s))


GEMM_CASES = [
    OpCase("gemm_nn", "a:mk b:kn", lambda a, b: ops.gemm(a, b, "c"), lambda a, b: a @ b),
    OpCase("gemm_tn", "a:km b:kn", lambda a, b: ops.gemm(a, b, "c", trans_a=True), lambda a, b: a.T @ b),
    OpCase("gemm_nt", "a:mk b:nk", lambda a, b: ops.gemm(a, b, "c", trans_b=True), lambda a, b: a @ b.T),
    OpCase("gemm_tt", "a:km b:nk", lambda a, b: ops.gemm(a, b, "c", 2.0, trans_a=True, trans_b=True), lambda a, b: 2 * a.T @ b.T),
    OpCase("gemm_m2", "a:mpk b:kn", lambda a, b: ops.gemm(a, b, "c"), lambda a, b: E("mpk,kn->mpn", a, b)),
    OpCase("gemm_ndim2", "a:mkl b:kln", lambda a, b: ops.gemm(a, b, "c", ndim=2), lambda a, b: E("mkl,kln->mn", a, b)),
    OpCase("gemm_ndim2_tt", "a:klm b:nkl", lambda a, b: ops.gemm(a, b, "c", trans_a=True, trans_b=True, ndim=2), lambda a, b: E("klm,nkl->mn", a, b)),
    OpCase("gemm_batch", "a:mkb b:knb", lambda a, b: ops.gemm(a, b, "c", batch_ndim=1), lambda a, b: E("mkb,knb->mnb", a, b)),
    OpCase("gemm_batch_tn", "a:kmb b:knb", lambda a, b: ops.gemm(a, b, "c", 0.5, trans_a=True, batch_ndim=1), lambda a, b: 0.5 * E("kmb,knb->mnb", a, b)),
    OpCase("gemm_param", "w:mk* x:kn", lambda w, x: ops.gemm(w, x, "y", 0.5), lambda w, x: 0.5 * w @ x),
    OpCase("gemm_accumulate", "a:mk b:kn c:mn", lambda a, b, c: ops.gemm(a, b, c, 0.5, 2.0), lambda a, b, c: 0.5 * a @ b + 2 * c),
    OpCase("gemm_accumulate_nt_batch", "a:mkb b:nkb c:mnb", lambda a, b, c: ops.gemm(a, b, c, 1.0, -1.0, trans_b=True, batch_ndim=1), lambda a, b, c: E("mkb,nkb->mnb", a, b) - c),
    OpCase("gemm_accumulate_param", "x:kn g:mk* w:mn*", lambda x, g, w: ops.gemm(g, x, w, -0.1, 1.0), lambda x, g, w: w - 0.1 * g @ x),
]

ELEMENTWISE_CASES = [
    OpCase("gelu_multiply_relu", "x:mn y:mn", lambda x, y: ops.relu_inplace(ops.multiply(ops.gelu(x, "h"), y, "z")), lambda x, y: relu(gelu(x) * y)),
    OpCase("silu_add_scale", "x:mn y:mn", lambda x, y: ops.scale_inplace(ops.add(2.0, ops.silu(x, "s"), -1.0, y, "z"), 0.5), lambda x, y: 0.5 * (2 * silu(x) - y)),
    OpCase("inplace_on_param", "x:mn* y:mn", lambda x, y: (ops.add_inplace(0.5, y, 2.0, x), ops.gelu_inplace(x))[1], lambda x, y: gelu(0.5 * y + 2 * x)),
    OpCase("scale_multiply_3d", "x:mnb y:mnb", lambda x, y: ops.multiply_inplace(ops.scale(x, "s", -1.5), y, 2.0), lambda x, y: 2.0 * (-1.5 * x) * y),
    OpCase("relu_silu_chain", "x:mn", lambda x: ops.silu(ops.relu(ops.scale(x, "s", 3.0), "r"), "y"), lambda x: silu(relu(3 * x))),
    OpCase("gelu_backward", "x:mn dy:mn dx:mn", lambda x, dy, dx: ops.gelu_backward(x, dy, dx), lambda x, dy, dx: dx + gelu_grad(x) * dy),
    OpCase("silu_relu_backward", "x:mn dy:mn dx:mn", lambda x, dy, dx: (ops.silu_backward(x, dy, dx), ops.relu_backward(x, dy, dx))[1], lambda x, dy, dx: dx + silu_grad(x) * dy + (x > 0) * dy),
]

REDUCTION_CASES = [
    OpCase("sum", "x:mn", lambda x: ops.sum(x, "s"), lambda x: np.array(x.sum())),
    OpCase("sum_beta", "x:mnb s:", lambda x, s: ops.sum(x, s, 2.0, 0.5), lambda x, s: 2 * x.sum() + 0.5 * s),
    OpCase("sum_fiber_axis0", "x:mnp", lambda x: ops.sum_fiber(x, "y", axis=0), lambda x: x.sum(axis=(1, 2))),
    OpCase("sum_fiber_batch", "x:mnb", lambda x: ops.sum_fiber(x, "y", axis=1, batch_ndim=1, alpha=2.0), lambda x: 2 * x.sum(axis=0)),
    OpCase("sum_fiber_beta", "x:mn y:m", lambda x, y: ops.sum_fiber(x, y, axis=0, beta=1.0), lambda x, y: y + x.sum(axis=1)),
    OpCase("add_fiber", "f:m x:mn", lambda f, x: ops.add_fiber(0.5, f, 2.0, x, "z", axis=0), lambda f, x: 0.5 * f[:, None] + 2 * x),
    OpCase("add_fiber_batch", "f:nb x:mnb", lambda f, x: ops.add_fiber(1.0, f, 1.0, x, "z", axis=1, batch_ndim=1), lambda f, x: f[None] + x),
    OpCase("add_fiber_inplace_bias", "b:m* x:mn", lambda b, x: ops.add_fiber_inplace(1.0, b, 1.0, x, axis=0), lambda b, x: x + b[:, None]),
    OpCase("sumprod_slice_last", "x:mn y:mn", lambda x, y: ops.sumprod_slice(x, y, "z", axis=1), lambda x, y: (x * y).sum(axis=1)),
    OpCase("sumprod_slice_mid", "x:mnb y:mnb", lambda x, y: ops.sumprod_slice(x, y, "z", 1, 0.5), lambda x, y: 0.5 * (x * y).sum(axis=1)),
    OpCase("sumprod_slice_beta", "x:mn y:mn z:m", lambda x, y, z: ops.sumprod_slice(x, y, z, axis=1, beta=2.0), lambda x, y, z: (x * y).sum(axis=1) + 2 * z),
    OpCase("softmax_axis0", "x:Mn", lambda x: ops.softmax(x, "y", axis=0), lambda x: softmax(x, 0)),
    OpCase("softmax_axis1", "x:mNb", lambda x: ops.softmax(x, "y", axis=1), lambda x: softmax(x, 1)),
    OpCase("logsumexp_axis0", "x:Mn", lambda x: ops.logsumexp(x, "y", axis=0), lambda x: logsumexp(x, 0)),
    OpCase("logsumexp_axis1", "x:mNp", lambda x: ops.logsumexp(x, "y", axis=1), lambda x: logsumexp(x, 1)),
    OpCase("logsumexp_split_axis0", "x:mnb", lambda x: ops.logsumexp(x, "y", axis=0), lambda x: logsumexp(x, 0)),
    OpCase("logsumexp_split_last", "x:mn", lambda x: ops.logsumexp(x, "y", axis=1), lambda x: logsumexp(x, 1)),
    OpCase("logsumexp_beta", "x:mn y:m", lambda x, y: ops.logsumexp(x, y, axis=1, beta=1.0), lambda x, y: np.logaddexp(y, logsumexp(x, 1))),
    OpCase("logsumexp_backward", "x:mn y:n dy:n dx:mn", lambda x, y, dy, dx: ops.logsumexp_backward(x, y, dy, dx, axis=0), lambda x, y, dy, dx: dx + np.exp(x - y) * dy),
    OpCase("softmax_from_logsumexp", "x:mnb", lambda x: ops.softmax_from_logsumexp(ops.logsumexp(x, "l", axis=1), x, "y", axis=1), lambda x: softmax(x, 1)),
    OpCase("softmax_from_logsumexp_last", "x:mn", lambda x: ops.softmax_from_logsumexp(ops.logsumexp(x, "l", axis=1), x, "y", axis=1), lambda x: softmax(x, 1)),
    OpCase("softmax_from_logsumexp_backward", "y:mn dy:mn x:mn", lambda y, dy, x: ops.softmax_from_logsumexp_backward(y, dy, ops.sumprod_slice(y, dy, "d", axis=1), x, axis=1), lambda y, dy, x: x + y * (dy - (y * dy).sum(axis=1, keepdims=True))),
    OpCase("attention", "q:dtb k:dsb v:esb", lambda q, k, v: ops.scaled_dot_product_attention(q, k, v, "o", scale=0.7), lambda q, k, v: E("esb,stb->etb", v, softmax(0.7 * E("dsb,dtb->stb", k, q), 0))),
    OpCase("mask_scalar", "m:mn? x:mn", lambda m, x: ops.mask_scalar(m, -2.5, ops.scale(x, "y", 1.0)), lambda m, x: np.where(m, x, -2.5)),
    OpCase("mask_scalar_batch", "m:mn? x:mnb", lambda m, x: ops.mask_scalar(m, -np.inf, ops.scale(x, "y", 2.0), batch_ndim=1), lambda m, x: np.where(m[..., None], 2 * x, -np.inf)),
    OpCase("transpose", "x:mn", lambda x: ops.transpose(x, "y"), lambda x: x.T.copy()),
    OpCase("transpose_3d", "x:mnp", lambda x: ops.transpose(x, "y", 2.0, ndim=1), lambda x: 2 * np.transpose(x, (1, 2, 0))),
    OpCase("transpose_ndim2", "x:mnp", lambda x: ops.transpose(x, "y", ndim=2), lambda x: np.transpose(x, (2, 0, 1))),
]

# LayerNorm's primitives and the composite: the tiling splits the reduced axes too
NORM_CASES = [
    OpCase("sum_slice", "x:mnb", lambda x: ops.sum_slice(x, "s", 1, 0.5), lambda x: 0.5 * x.sum(axis=1)),
    OpCase("sum_slice_beta", "x:mn s:m", lambda x, s: ops.sum_slice(x, s, 1, 2.0, 0.5), lambda x, s: 2 * x.sum(axis=1) + 0.5 * s),
    OpCase("add_slice", "s:mb x:mnb", lambda s, x: ops.add_slice(-1.0, s, 2.0, x, "z", 1), lambda s, x: 2 * x - s[:, None, :]),
    OpCase("add_slice_inplace", "s:n x:mn*", lambda s, x: ops.add_slice_inplace(0.5, s, 1.0, x, 0), lambda s, x: x + 0.5 * s[None]),
    OpCase("multiply_slice", "s:nb x:mnb", lambda s, x: ops.multiply_slice(s, x, "z", 0, 1.5), lambda s, x: 1.5 * s[None] * x),
    OpCase("multiply_fiber", "f:n x:mnb", lambda f, x: ops.multiply_fiber(f, x, "z", 1, alpha=0.5), lambda f, x: 0.5 * f[None, :, None] * x),
    OpCase("multiply_fiber_batch", "f:mb x:mnb", lambda f, x: ops.multiply_fiber(f, x, "z", 0, 1), lambda f, x: f[:, None, :] * x),
    OpCase("sumprod_fiber", "x:mnb y:mnb", lambda x, y: ops.sumprod_fiber(x, y, "f", 1), lambda x, y: (x * y).sum(axis=(0, 2))),
    OpCase("sumprod_fiber_beta_batch", "x:mnb y:mnb f:nb", lambda x, y, f: ops.sumprod_fiber(x, y, f, 1, 1, 2.0, 0.5), lambda x, y, f: 2 * (x * y).sum(axis=0) + 0.5 * f),
    OpCase("sumprod_fiber_backward", "f:n x:mn dx:mn", lambda f, x, dx: ops.sumprod_fiber_backward(f, x, dx, 1, alpha=-2.0), lambda f, x, dx: dx - 2 * f[None] * x),
    OpCase("pow", "x:mn", lambda x: ops.pow(x, "y", 0.5, 3.0), lambda x: 0.5 * x**3),
    OpCase("pow_backward", "x:mn dy:mn dx:mn", lambda x, dy, dx: ops.pow_backward(x, dy, dx, 0.5, 2.0), lambda x, dy, dx: dx + x * dy),
    OpCase("layer_norm_axis0", "x:mnb g:m* b:m*", lambda x, g, b: ops.layer_norm(x, g, b, "y", axis=0), lambda x, g, b: layer_norm(x, g, b, 0)),
    OpCase("layer_norm_axis1", "x:mnb g:n* b:n*", lambda x, g, b: ops.layer_norm(x, g, b, "y", axis=1, eps=0.1), lambda x, g, b: layer_norm(x, g, b, 1, 0.1)),
]

# elementwise ops and reductions along axes: reduced axes split too
MATH_CASES = [
    OpCase("sub_div", "x:mn y:mn", lambda x, y: ops.div(ops.sub(x, y, "d"), ops.sigmoid(y, "s"), "z"), lambda x, y: (x - y) * (1 + np.exp(-y))),
    OpCase("tanh_inplace", "x:mnb*", lambda x: ops.tanh_inplace(x), np.tanh),
    OpCase("tanh_sigmoid_backward", "x:mn dy:mn dx:mn", lambda x, dy, dx: (ops.tanh_backward(x, dy, dx), ops.sigmoid_backward(x, dy, dx))[1], lambda x, dy, dx: dx + (1 - np.tanh(x) ** 2) * dy + np.exp(-x) / (1 + np.exp(-x)) ** 2 * dy),
    OpCase("hypot", "x:mn y:mn", lambda x, y: ops.hypot(0.5, x, -2.0, y, "z"), lambda x, y: np.hypot(0.5 * x, 2 * y)),
    OpCase("hypot_inplace_scalar_inverse", "x:mn y:mn*", lambda x, y: (ops.hypot_inplace(1.0, x, 1.0, y), ops.hypot_scalar_inverse(0.5, 2.0, y))[1], lambda x, y: 1 / np.hypot(2 * np.hypot(x, y), 0.5)),
    OpCase("max_axis1", "x:mnb", lambda x: ops.max(x, "y", axes=1), lambda x: x.max(axis=1)),
    OpCase("min_two_axes", "x:mnb", lambda x: ops.min(x, "y", axes=(0, 2)), lambda x: x.min(axis=(0, 2))),
    OpCase("mean_two_axes", "x:mnb", lambda x: ops.mean(x, "y", axes=(0, 1)), lambda x: x.mean(axis=(0, 1))),
    OpCase("max_into", "x:mn y:m", lambda x, y: ops.apply("max", [x], [y], axis=1, beta=1.0), lambda x, y: np.maximum(x.max(axis=1), y)),
    OpCase("norm_slice", "x:mnb", lambda x: ops.norm_slice(-2.0, x, "y", axis=1), lambda x: 2 * np.sqrt((x * x).sum(axis=1))),
    OpCase("norm_slice_inplace", "x:mn y:n", lambda x, y: ops.norm_slice_inplace(1.0, x, 0.5, y, axis=0), lambda x, y: np.hypot(np.sqrt((x * x).sum(axis=0)), 0.5 * y)),
    OpCase("norm_fiber", "x:mnb", lambda x: ops.norm_fiber(2.0, x, "y", axis=1), lambda x: 2 * np.sqrt((x * x).sum(axis=(0, 2)))),
    OpCase("norm_fiber_inplace_batch", "x:mnb y:mb", lambda x, y: ops.norm_fiber_inplace(1.0, x, -1.0, y, axis=0, batch_ndim=1), lambda x, y: np.hypot(np.sqrt((x * x).sum(axis=1)), y)),
    OpCase("scale_fiber", "f:n x:mn", lambda f, x: ops.scale_fiber(0.5, f, x, axis=1), lambda f, x: np.broadcast_to(0.5 * f[None], x.shape)),
    OpCase("sum_backward", "s: x:mnb*", lambda s, x: ops.sum_backward(s, x, 2.0), lambda s, x: x + 2 * s),
    OpCase("randn", "x:mnb*", lambda x: ops.randn(x, 11, 0.5, 2.0), lambda x: randn_numpy(x.shape, seed=11, mean=0.5, stddev=2.0)),
]

OP_CASES = GEMM_CASES + ELEMENTWISE_CASES + REDUCTION_CASES + NORM_CASES + MATH_CASES
