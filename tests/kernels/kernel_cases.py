"""The kernel table's cases: one line per case (kernel name, its positional arrays, its
keyword params), and the arrays each case is run on. Read by test_kernels_table.py (every
backend against the NumPy reference), test_kernels_precision.py and the GPU precision tests.
"""

# ruff: noqa: E501 - the case table keeps one case per line, however long

from dataclasses import dataclass

import numpy as np
import pytest


@dataclass(frozen=True)
class Arg:
    """How to build one positional kernel array."""

    shape: tuple = ()
    kind: str = "normal"  # normal | positive | zeros | masked | neginf | garbage | unread
    #                       | index | mask | step | same
    low: int = 0  # index: lowest value; same: position of the aliased argument
    high: int = 0  # index: one past the highest value; step: the step number
    dtype: str | None = None  # None: the dtype the case runs with


def A(*shape):
    """Normal random floats."""
    return Arg(shape)


def Pos(*shape):
    """Positive floats in [0.5, 2) (sqrt, Adam's second moment)."""
    return Arg(shape, "positive")


def Zeros(*shape):
    """Exact zeros (relu'(0) = 0)."""
    return Arg(shape, "zeros")


def Masked(*shape):
    """Normal floats, about 30% -inf (masked scores), and -inf wherever the last index is 0,
    so slices along the other axes are entirely -inf."""
    return Arg(shape, "masked")


def NegInf(*shape):
    """All -inf (a slice every entry of which is masked)."""
    return Arg(shape, "neginf")


def Bool(*shape):
    """A random bool mask, about 70% True."""
    return Arg(shape, "mask", dtype="bool")


def Nan(*shape, dtype=None):
    """An output whose old contents must not be read: filled with NaN."""
    return Arg(shape, "garbage", dtype=dtype)


def Unread(*shape):
    """An input that must not be read (y of add with beta == 0): NaN, and stays NaN."""
    return Arg(shape, "unread")


def Idx(shape, low, high):
    """int64 indices in [low, high)."""
    return Arg(shape, "index", low, high, "int64")


def Labels(shape, classes):
    """int64 labels in [0, classes), about 25% of them ignore_index -100."""
    return Arg(shape, "labels", 0, classes, "int64")


def Step(number):
    """A 0-d int64 step counter."""
    return Arg((), "step", high=number, dtype="int64")


def Same(position):
    """The very same array object as argument `position` (in-place aliasing)."""
    return Arg(kind="same", low=position)


def case(name, args, **params):
    """One table line: kernel name, its positional arrays, its keyword params."""
    return pytest.param(name, tuple(args), params, id=name)


# fmt: off
CASES = [
    case("gemm", [A(5, 3), A(3, 4), A(5, 4)], alpha=1.0, beta=0.0),
    case("gemm", [A(5, 3), A(3, 4), A(5, 4)], alpha=0.5, beta=-1.5),
    case("gemm", [A(3, 5), A(3, 4), A(5, 4)], alpha=1.0, beta=1.0, trans_a=True),
    case("gemm", [A(5, 3), A(4, 3), Nan(5, 4)], alpha=2.0, beta=0.0, trans_b=True),
    case("gemm", [A(3, 5), A(4, 3), A(5, 4)], alpha=1.0, beta=0.5, trans_a=True, trans_b=True),
    case("gemm", [A(2, 3, 4, 2), A(4, 2, 5), Nan(2, 3, 5)], alpha=1.0, beta=0.0, ndim=2),
    case("gemm", [A(3, 4, 2), A(4, 5, 2), A(3, 5, 2)], alpha=1.0, beta=1.0, batch_ndim=1),
    case("gemm", [A(2, 3, 4, 2), A(5, 2, 3, 2), Nan(4, 5, 2)], alpha=-1.0, beta=0.0, trans_a=True, trans_b=True, ndim=2, batch_ndim=1),
    case("gemm", [A(7), A(7, 3), A(3)], alpha=1.0, beta=2.0),
    case("gemm", [A(5), A(4), Nan(5, 4)], alpha=1.0, beta=0.0, ndim=0),
    case("transpose", [A(5, 3), Nan(3, 5)], alpha=1.0, ndim=1),
    case("transpose", [A(3, 4, 2), Nan(2, 3, 4)], alpha=0.5, ndim=2),
    case("transpose", [A(40, 33), Nan(33, 40)], alpha=-2.0, ndim=1),
    case("transpose", [A(7), Nan(7)], alpha=1.0, ndim=1),
    case("permute", [A(3, 4, 2), Nan(3, 2, 4)], alpha=1.0, perm=(0, 2, 1)),
    case("permute", [A(3, 4, 2, 5), Nan(2, 3, 5, 4)], alpha=-0.5, perm=(2, 0, 3, 1)),
    case("permute", [A(5, 3), Nan(5, 3)], alpha=2.0, perm=(0, 1)),
    case("add", [A(5, 3), A(5, 3), A(5, 3)], alpha=0.5, beta=-2.0),
    case("add", [A(7), A(7), Same(1)], alpha=1.5, beta=1.0),
    case("add", [A(5, 3), A(5, 3), Same(0)], alpha=2.0, beta=0.5),
    case("add", [A(3, 4, 2), Unread(3, 4, 2), Nan(3, 4, 2)], alpha=2.0, beta=0.0),
    case("add", [A(), A(), A()], alpha=1.0, beta=1.0),
    case("multiply", [A(5, 3), A(5, 3), Nan(5, 3)]),
    case("multiply", [A(7), A(7), Same(1)], alpha=-0.5),
    case("multiply", [A(), A(), A()], alpha=2.0),
    case("scale", [A(3, 4, 2), Nan(3, 4, 2)], alpha=0.5),
    case("scale", [A(7), Same(0)], alpha=3.0),
    case("add_scalar", [A(5, 3)], value=0.25),
    case("add_scalar", [Step(3)], value=1),
    case("fill", [Nan(5, 3)], value=1.5),
    case("clear", [Nan(3, 4, 2)]),
    case("copy", [A(5, 3), Nan(5, 3)]),
    case("cast", [A(5, 3), Nan(5, 3, dtype="float64")]),
    case("cast", [A(7), Nan(7, dtype="float32")]),
    case("cast", [Idx((4,), -3, 9), Nan(4)]),
    case("gelu", [A(5, 3), Nan(5, 3)]),
    case("gelu", [A(7), Same(0)]),
    case("gelu", [A(), Nan()]),
    case("gelutanh", [A(5, 3), Nan(5, 3)]),
    case("gelutanh", [A(3, 4, 2), Same(0)]),
    case("relu", [A(5, 3), Nan(5, 3)]),
    case("relu", [A(7), Same(0)]),
    case("silu", [A(5, 3), Nan(5, 3)]),
    case("silu", [A(7), Same(0)]),
    case("sqrt", [Pos(5, 3), Nan(5, 3)]),
    case("sqrt", [Pos(7), Same(0)]),
    case("gelu_backward", [A(5, 3), A(5, 3), A(5, 3)]),
    case("gelu_backward", [A(3, 4, 2), A(3, 4, 2), Same(1)]),
    case("gelutanh_backward", [A(5, 3), A(5, 3), A(5, 3)]),
    case("gelutanh_backward", [A(7), A(7), Same(1)]),
    case("relu_backward", [A(5, 3), A(5, 3), A(5, 3)]),
    case("relu_backward", [Zeros(7), A(7), A(7)]),
    case("silu_backward", [A(5, 3), A(5, 3), A(5, 3)]),
    case("silu_backward", [A(), A(), A()]),
    case("sqrt_backward", [Pos(5, 3), A(5, 3), A(5, 3)]),
    case("sqrt_backward", [Pos(7), A(7), Same(1)]),
    case("sum", [A(5, 3), Nan()], alpha=1.0, beta=0.0),
    case("sum", [A(3, 4, 2), A()], alpha=0.5, beta=2.0),
    case("sum", [A(), A()], alpha=1.0, beta=1.0),
    case("sum_fiber", [A(5, 3), Nan(3)], axis=1),
    case("sum_fiber", [A(3, 4, 2), A(4)], axis=1, alpha=0.5, beta=1.5),
    case("sum_fiber", [A(3, 4, 2), Nan(3, 2)], axis=0, batch_ndim=1),
    case("sum_fiber", [A(2, 3, 4, 5), Nan(3, 4, 5)], axis=1, batch_ndim=2),
    case("sum_fiber", [A(7), Nan(7)], axis=0),
    case("sum_fiber", [A(19, 3, 2), A(19)], axis=0, alpha=0.5, beta=1.5),
    case("sum_fiber", [A(3, 19, 2), Nan(19)], axis=1),
    case("add_fiber", [A(3), A(3, 5), Same(1)], axis=0, alpha=1.0, beta=1.0),
    case("add_fiber", [A(4), Unread(3, 4, 2), Nan(3, 4, 2)], axis=1, beta=0.0),
    case("add_fiber", [A(3, 2), A(3, 4, 2), A(3, 4, 2)], axis=0, batch_ndim=1, alpha=0.5, beta=-1.0),
    case("add_fiber", [A(7), A(7), A(7)], axis=0, alpha=2.0, beta=1.0),
    case("add_fiber", [A(19), A(19, 3), Same(1)], axis=0, alpha=1.0, beta=1.0),
    case("add_fiber", [A(19, 2), Unread(19, 3, 2), Nan(19, 3, 2)], axis=0, batch_ndim=1, beta=0.0),
    case("sumprod_slice", [A(5, 3), A(5, 3), Nan(3)], axis=0),
    case("sumprod_slice", [A(3, 4, 2), A(3, 4, 2), A(3, 2)], axis=1, alpha=0.5, beta=-1.5),
    case("sumprod_slice", [A(3, 4, 2), A(3, 4, 2), Nan(3, 4)], axis=2, alpha=2.0),
    case("sumprod_slice", [A(2, 3, 1, 5), A(2, 3, 1, 5), Nan(3, 1, 5)], axis=0),
    case("sumprod_slice", [A(7), A(7), A()], axis=0, beta=1.0),
    case("sumprod_slice", [A(19, 3), A(19, 3), Nan(3)], axis=0, alpha=0.5),
    case("sumprod_slice_backward", [A(3), A(5, 3), A(5, 3)], axis=0),
    case("sumprod_slice_backward", [A(3, 2), A(3, 4, 2), A(3, 4, 2)], axis=1, alpha=-0.5),
    case("sumprod_slice_backward", [A(3, 4), A(3, 4, 2), A(3, 4, 2)], axis=2, alpha=2.0),
    case("sumprod_slice_backward", [A(), A(7), A(7)], axis=0),
    case("sum_slice", [A(5, 3), Nan(3)], axis=0),
    case("sum_slice", [A(3, 4, 2), A(3, 2)], axis=1, alpha=0.5, beta=-1.5),
    case("sum_slice", [A(3, 4, 2), Nan(3, 4)], axis=2, alpha=2.0),
    case("sum_slice", [A(2, 3, 1, 5), Nan(3, 1, 5)], axis=0, alpha=1 / 3),
    case("sum_slice", [A(7), A()], axis=0, beta=1.0),
    case("sum_slice", [A(19, 3), A(3)], axis=0, alpha=0.5, beta=2.0),  # m == 1: 8 running sums
    case("add_slice", [A(3), A(5, 3), Nan(5, 3)], axis=0, alpha=-1.0, beta=1.0),
    case("add_slice", [A(3, 2), Unread(3, 4, 2), Nan(3, 4, 2)], axis=1, alpha=2.0, beta=0.0),
    case("add_slice", [A(3, 4), A(3, 4, 2), Same(1)], axis=2, alpha=0.5, beta=-1.5),
    case("add_slice", [A(), A(7), A(7)], axis=0, alpha=1.0, beta=1.0),
    case("multiply_slice", [A(3), A(5, 3), Nan(5, 3)], axis=0),
    case("multiply_slice", [A(3, 2), A(3, 4, 2), Same(1)], axis=1, alpha=-0.5),
    case("multiply_slice", [A(1, 5), A(2, 1, 5), Nan(2, 1, 5)], axis=0, alpha=2.0),
    case("multiply_slice", [A(), A(7), Nan(7)], axis=0, alpha=3.0),
    case("multiply_fiber", [A(5), A(5, 3), Nan(5, 3)], axis=0),
    case("multiply_fiber", [A(4), A(3, 4, 2), Same(1)], axis=1, alpha=-0.5),
    case("multiply_fiber", [A(3, 2), A(3, 4, 2), Nan(3, 4, 2)], axis=0, batch_ndim=1, alpha=2.0),
    case("multiply_fiber", [A(7), A(7), Nan(7)], axis=0, alpha=1.5),
    case("sumprod_fiber", [A(5, 3), A(5, 3), Nan(5)], axis=0),
    case("sumprod_fiber", [A(3, 4, 2), A(3, 4, 2), A(4)], axis=1, alpha=0.5, beta=-1.5),
    case("sumprod_fiber", [A(3, 4, 2), A(3, 4, 2), Nan(3, 2)], axis=0, batch_ndim=1),
    case("sumprod_fiber", [A(2, 3, 4, 5), A(2, 3, 4, 5), Nan(3, 4, 5)], axis=1, batch_ndim=2, alpha=2.0),
    case("sumprod_fiber", [A(7), A(7), A(7)], axis=0, beta=1.0),
    case("sumprod_fiber", [A(19, 4, 2), A(19, 4, 2), Nan(4)], axis=1),
    case("sumprod_fiber", [A(19, 4, 2), A(19, 4, 2), A(19)], axis=0, alpha=0.5, beta=1.0),
    case("sumprod_fiber_backward", [A(5), A(5, 3), A(5, 3)], axis=0),
    case("sumprod_fiber_backward", [A(4), A(3, 4, 2), A(3, 4, 2)], axis=1, alpha=-0.5),
    case("sumprod_fiber_backward", [A(3, 2), A(3, 4, 2), Same(1)], axis=0, batch_ndim=1, alpha=2.0),
    case("pow", [Pos(5, 3), Nan(5, 3)], alpha=1.0, exp=-0.5),
    case("pow", [A(3, 4, 2), Same(0)], alpha=0.5, exp=2.0),
    case("pow", [Pos(7), Nan(7)], alpha=-2.0, exp=1.5),
    case("pow", [Pos(), Nan()], alpha=1.0, exp=3.0),
    case("pow_backward", [Pos(5, 3), A(5, 3), A(5, 3)], alpha=1.0, exp=-0.5),
    case("pow_backward", [A(3, 4, 2), A(3, 4, 2), Same(1)], alpha=0.5, exp=3.0),
    case("pow_backward", [Pos(7), A(7), A(7)], alpha=-2.0, exp=1.0),
    case("softmax_from_logsumexp", [A(3), A(5, 3), Nan(5, 3)], axis=0),
    case("softmax_from_logsumexp", [A(3), Masked(5, 3), Same(1)], axis=0),
    case("softmax_from_logsumexp", [A(3, 2), A(3, 4, 2), Nan(3, 4, 2)], axis=1),
    case("softmax_from_logsumexp", [A(3, 4), Masked(3, 4, 2), Nan(3, 4, 2)], axis=2),
    case("softmax_from_logsumexp", [A(), A(7), Nan(7)], axis=0),
    case("softmax_from_logsumexp_backward", [A(5, 3), A(5, 3), A(3), A(5, 3)], axis=0),
    case("softmax_from_logsumexp_backward", [A(3, 4, 2), A(3, 4, 2), A(3, 2), A(3, 4, 2)], axis=1),
    case("softmax_from_logsumexp_backward", [A(3, 4, 2), A(3, 4, 2), A(4, 2), Same(1)], axis=0),
    case("softmax_from_logsumexp_backward", [A(7), A(7), A(), A(7)], axis=0),
    case("mask_scalar", [Bool(5, 3), A(5, 3), Nan(5, 3)], val=-np.inf),
    case("mask_scalar", [Bool(5, 3), A(5, 3), Same(1)], val=0.0),
    case("mask_scalar", [Bool(3, 4), A(3, 4, 2), Same(1)], val=-np.inf, batch_ndim=1),
    case("mask_scalar", [Bool(3), A(3, 4, 2), Nan(3, 4, 2)], val=2.5, batch_ndim=2),
    case("mask_scalar", [Bool(), A(7), Same(1)], val=-1.0, batch_ndim=1),
    case("mask_causal", [A(5, 3), Nan(5, 3)], val=-np.inf),
    case("mask_causal", [A(4, 6, 2), Same(0)], val=0.0, key_offset=3, query_offset=2),
    case("softmax", [A(5, 3), Nan(5, 3)], axis=0),
    case("softmax", [A(3, 4, 2), Nan(3, 4, 2)], axis=1),
    case("softmax", [A(3, 4, 2), Same(0)], axis=2),
    case("softmax", [A(7), Same(0)], axis=0),
    case("softmax_backward", [A(5, 3), A(5, 3), A(5, 3)], axis=0),
    case("softmax_backward", [A(3, 4, 2), A(3, 4, 2), A(3, 4, 2)], axis=1),
    case("softmax_backward", [A(7), A(7), A(7)], axis=0),
    case("logsumexp", [A(5, 3), Nan(3)], axis=0),
    case("logsumexp", [A(3, 4, 2), Nan(3, 2)], axis=1),
    case("logsumexp", [A(7), Nan()], axis=0),
    case("logsumexp", [Masked(5, 3), Nan(3)], axis=0),
    case("logsumexp", [A(5, 3), A(3)], axis=0, beta=1.0),
    case("logsumexp", [Masked(3, 4, 2), Masked(3, 2)], axis=1, beta=1.0),
    case("logsumexp", [A(3, 4, 2), A(3, 4)], axis=2, beta=0.5),
    case("logsumexp", [NegInf(7), Nan()], axis=0),
    case("logsumexp", [NegInf(7), A()], axis=0, beta=1.0),
    case("logsumexp", [NegInf(7), NegInf()], axis=0, beta=1.0),
    case("logsumexp_merge", [A(5, 3), A(5, 3), Same(1)]),
    case("logsumexp_merge", [Masked(5, 3), Masked(5, 3), Same(1)], alpha=1.0, beta=1.0),
    case("logsumexp_merge", [A(7), Unread(7), Nan(7)], alpha=1.0, beta=0.0),
    case("logsumexp_merge", [A(3, 4, 2), A(3, 4, 2), A(3, 4, 2)], alpha=0.5, beta=2.0),
    case("logsumexp_merge", [NegInf(), NegInf(), Same(1)], alpha=1.0, beta=1.0),
    case("logsumexp_backward", [A(5, 3), A(3), A(3), A(5, 3)], axis=0),
    case("logsumexp_backward", [Masked(5, 3), Masked(3), A(3), A(5, 3)], axis=0),
    case("logsumexp_backward", [A(3, 4, 2), A(3, 2), A(3, 2), Same(0)], axis=1),
    case("logsumexp_backward", [A(7), A(), A(), A(7)], axis=0),
    case("maxsumexp", [A(5, 3), Nan(2, 3)], axis=0),
    case("maxsumexp", [A(3, 4, 2), Nan(2, 3, 4)], axis=2),
    case("cross_entropy", [A(5, 3), Idx((3,), 0, 5), Nan()], alpha=1.0, beta=0.0),
    case("cross_entropy", [A(4, 3, 2), Idx((3, 2), 0, 4), A()], alpha=0.5, beta=1.0),
    case("cross_entropy", [A(6), Idx((), 0, 6), Nan()]),
    case("cross_entropy_backward", [A(5, 3), Idx((3,), 0, 5), A(), A(5, 3)], alpha=1.0),
    case("cross_entropy_backward", [A(4, 3, 2), Idx((3, 2), 0, 4), A(), A(4, 3, 2)], alpha=0.5),
    case("valid_count", [Labels((3, 2), 5), Nan()], ignore_index=-100),
    case("valid_count", [Labels((7,), 5), A()], ignore_index=-100, beta=1.0),
    case("valid_count", [Idx((4,), 0, 3), Nan()], ignore_index=1),
    case("cross_entropy_lse", [A(5, 3), A(3), Labels((3,), 5), Pos(), Nan()], num_classes=5),
    case("cross_entropy_lse", [A(2, 3, 2), A(3, 2), Labels((3, 2), 7), Pos(), A()], num_classes=7, class_offset=3, beta=1.0),
    case("cross_entropy_lse", [A(3, 4), A(4), Labels((4,), 6), Pos(), Nan()], num_classes=6, ignore_index=-100),
    case("cross_entropy_lse", [A(6), A(), Idx((), 0, 6), Pos(), Nan()], num_classes=6),
    case("cross_entropy_lse_backward", [A(5, 3), A(3), Labels((3,), 5), Pos(), A(), A(5, 3)], num_classes=5),
    case("cross_entropy_lse_backward", [A(2, 3, 2), A(3, 2), Labels((3, 2), 7), Pos(), A(), A(2, 3, 2)], num_classes=7, class_offset=3),
    case("cross_entropy_lse_backward", [A(6), A(), Idx((), 0, 6), Pos(), A(), A(6)], num_classes=6),
    case("mse", [A(5, 3), A(5, 3), Nan()], alpha=1.0, beta=0.0),
    case("mse", [A(7), A(7), A()], alpha=0.5, beta=2.0),
    case("mse_backward", [A(5, 3), A(5, 3), A(), A(5, 3)], alpha=1.0),
    case("mse_backward", [A(3, 4, 2), A(3, 4, 2), A(), A(3, 4, 2)], alpha=0.5),
    case("embedding", [Idx((5,), 0, 9), A(3, 4), Nan(3, 5)], axis=0, vocab_size=9, vocab_offset=2),
    case("embedding", [Idx((2, 3), 0, 6), A(4, 6), Nan(2, 4, 3)], axis=1, vocab_size=6),
    case("embedding", [Idx((2, 3), 0, 9), A(4, 3), A(2, 3, 4)], axis=2, vocab_size=9, vocab_offset=3, beta=1.0),
    case("embedding_backward", [Idx((5,), 0, 9), A(3, 5), Nan(3, 4)], axis=0, vocab_size=9, vocab_offset=2),
    case("embedding_backward", [Idx((2, 3), 0, 4), A(2, 5, 3), A(5, 4)], axis=1, vocab_size=4, beta=1.0),
    case("embedding_backward", [Idx((2, 3), 0, 9), A(2, 3, 4), A(4, 3)], axis=2, vocab_size=9, vocab_offset=3, beta=0.5),
    case("sgd_step", [Step(1), A(5, 3), A(5, 3), Nan(5, 3)], lr=0.1, momentum=0.9),
    case("sgd_step", [Step(4), A(7), A(7), A(7)], lr=0.1, momentum=0.9, dampening=0.1, weight_decay=0.01, nesterov=True),
    case("sgd_step", [Step(2), A(5, 3), A(5, 3), A(5, 3)], lr=0.1, weight_decay=0.1),
    case("sgd_step", [Step(3), A(), A(), A()], lr=0.5, momentum=0.5),
    case("adam_step", [Step(1), A(5, 3), A(5, 3), Nan(5, 3), Nan(5, 3)], lr=1e-3),
    case("adam_step", [Step(5), A(7), A(7), A(7), Pos(7)], lr=0.01, weight_decay=0.1),
    case("adamw_step", [Step(1), A(3, 4, 2), A(3, 4, 2), Nan(3, 4, 2), Nan(3, 4, 2)], lr=1e-3, weight_decay=0.01),
    case("adamw_step", [Step(7), A(7), A(7), A(7), Pos(7)], lr=0.01, beta1=0.8, beta2=0.99, eps=1e-6, weight_decay=0.1),
    case("rope", [A(3, 5, 2), A(3, 5, 2), A(6, 5, 2, 3), Nan(6, 5, 2, 3)]),
    case("rope", [A(1), A(1), A(2, 4), Nan(2, 4)]),
    case("rope_backward", [A(2, 3), A(2, 3), A(4, 3, 5), A(4, 3, 5)]),
    case("scale_slice", [A(3, 2), Nan(3, 4, 2)], alpha=2.0, axis=1),
    case("scale_slice", [A(4, 3), Nan(4, 3, 2)], alpha=1.0, axis=2),
    # seed elementwise and reduction kernels (rules of formulas/elementwise.py and reductions.py)
    case("sub", [A(5, 3), A(5, 3), Nan(5, 3)]),
    case("sub", [A(7), A(7), Same(1)]),
    case("div", [A(5, 3), Pos(5, 3), Nan(5, 3)]),
    case("div", [A(3, 4, 2), Pos(3, 4, 2), Same(0)]),
    case("div", [Pos(7), Zeros(7), Nan(7)]),   # x / 0 is inf, as in NumPy
    case("tanh", [A(5, 3), Nan(5, 3)]),
    case("tanh", [A(7), Same(0)]),
    case("tanh_backward", [A(3, 4, 2), A(3, 4, 2), A(3, 4, 2)]),
    case("tanh_backward", [A(7), A(7), Same(1)]),
    case("sigmoid", [A(5, 3), Nan(5, 3)]),
    case("sigmoid", [A(), Same(0)]),
    case("sigmoid_backward", [A(3, 4, 2), A(3, 4, 2), A(3, 4, 2)]),
    case("sigmoid_backward", [A(7), A(7), Same(1)]),
    case("hypot", [A(5, 3), A(5, 3), Nan(5, 3)], alpha=0.5, beta=-2.0),
    case("hypot", [A(7), A(7), Same(1)], alpha=1.0, beta=1.0),
    case("hypot", [A(3, 4, 2), Unread(3, 4, 2), Nan(3, 4, 2)], alpha=-2.0, beta=0.0),
    case("hypot_backward", [A(5, 3), Pos(5, 3), A(5, 3), A(5, 3)], alpha=0.5),
    case("hypot_backward", [Zeros(7), Zeros(7), A(7), A(7)], alpha=2.0),
    case("hypot_scalar_inverse", [A(5, 3), Nan(5, 3)], eps=0.1, alpha=2.0),
    case("hypot_scalar_inverse", [A(7), Same(0)], eps=1.0),
    case("max_slice", [A(5, 3), Nan(3)], axis=0),
    case("max_slice", [A(3, 4, 2), A(3, 2)], axis=1, beta=1.0),
    case("max_slice", [A(3, 4, 2), Nan(3, 4)], axis=2),
    case("max_slice", [A(7), A()], axis=0, beta=0.5),
    case("min_slice", [A(5, 3), Nan(5)], axis=1),
    case("min_slice", [A(3, 4, 2), A(4, 2)], axis=0, beta=1.0),
    case("maximum", [A(5, 3), A(5, 3), Same(1)], alpha=1.0, beta=1.0),
    case("maximum", [A(7), Unread(7), Nan(7)], alpha=1.0, beta=0.0),
    case("minimum", [A(5, 3), A(5, 3), Same(1)], alpha=1.0, beta=1.0),
    case("minimum", [A(7), Unread(7), Nan(7)], alpha=2.0, beta=0.0),
    case("extremum_count", [Zeros(5, 3), Zeros(3), Nan(3)], axis=0),
    case("extremum_count", [A(3, 4, 2), A(3, 2), A(3, 2)], axis=1, beta=1.0),
    case("extremum_count", [Zeros(3, 4, 2), Zeros(3, 4), A(3, 4)], axis=2, beta=1.0),
    case("extremum_backward", [Zeros(5, 3), Zeros(3), Pos(3), A(3), A(5, 3)], axis=0),
    case("extremum_backward", [Zeros(3, 4, 2), Zeros(3, 2), Pos(3, 2), A(3, 2), Zeros(3, 4, 2)], axis=1),
    case("extremum_backward", [A(7), A(), Pos(), A(), A(7)], axis=0),
    case("norm_slice", [A(5, 3), Nan(3)], axis=0, alpha=2.0),
    case("norm_slice", [A(3, 4, 2), A(3, 2)], axis=1, alpha=-0.5, beta=1.0),
    case("norm_slice", [A(3, 4, 2), A(3, 4)], axis=2, alpha=1.0, beta=2.0),
    case("norm_slice", [A(7), A()], axis=0, beta=1.0),
    case("norm_slice_backward", [A(5, 3), Pos(3), A(3), A(5, 3)], axis=0, alpha=2.0),
    case("norm_slice_backward", [A(3, 4, 2), Pos(3, 2), A(3, 2), Same(0)], axis=1),
    case("norm_slice_backward", [Zeros(3, 4, 2), Zeros(3, 4), A(3, 4), A(3, 4, 2)], axis=2),
    case("scale_fiber", [A(4), Nan(3, 4, 2)], axis=1, alpha=0.5),
    case("scale_fiber", [A(3, 2), Nan(3, 4, 2)], axis=0, batch_ndim=1, alpha=2.0),
    case("scale_fiber", [A(7), Nan(7)], axis=0),
    case("norm_fiber", [A(3, 4, 2), Nan(4)], axis=1, alpha=2.0),
    case("norm_fiber", [A(3, 4, 2), A(3, 2)], axis=0, batch_ndim=1, alpha=-0.5, beta=1.0),
    case("norm_fiber", [A(2, 3, 4, 5), A(3, 4, 5)], axis=1, batch_ndim=2, beta=2.0),
    case("norm_fiber", [A(7), Nan(7)], axis=0),
    case("norm_fiber_backward", [A(3, 4, 2), Pos(4), A(4), A(3, 4, 2)], axis=1, alpha=2.0),
    case("norm_fiber_backward", [A(3, 4, 2), Pos(3, 2), A(3, 2), Same(0)], axis=0, batch_ndim=1),
    case("norm_fiber_backward", [Zeros(3, 4, 2), Zeros(4), A(4), A(3, 4, 2)], axis=1),
    case("sum_backward", [A(), A(5, 3), Same(1)], alpha=0.5),
    case("sum_backward", [A(), A(3, 4, 2), Nan(3, 4, 2)]),
    case("sum_backward", [A(), A(), Same(1)], alpha=2.0),
    case("randn", [Nan(5, 3)], seed=3),
    case("randn", [Nan(3, 4, 2)], seed=7, mean=0.5, stddev=2.0, offset=(2, 1, 0), shape=(6, 5, 2)),
    case("randn", [Nan()], seed=0, offset=(), shape=()),
    case("dropout", [A(5, 3), Nan(5, 3)], p=0.3, seed=3, step=2.0),
    case("dropout", [A(3, 4, 2), Nan(3, 4, 2)], p=0.5, seed=1, offset=(2, 1, 0), shape=(6, 5, 2)),
    case("dropout", [A(4), Nan(4)], p=0.0, seed=0),
    # data movement between tilings (nntile_kernels/generic_data.py)
    case("add_box", [A(4, 3), Nan(3, 5)], x_offset=(2, 0), y_offset=(3, 1), beta=0.0),
    case("add_box", [A(4, 3), A(3, 5)], x_offset=(2, 0), y_offset=(3, 1), beta=1.0),
    case("add_box", [A(2, 2), A(3, 5)], x_offset=(9, 0), y_offset=(0, 0), beta=0.5),
    case("add_box", [A(3, 4, 2), Nan(3, 2, 2)], x_offset=(0, 4, 0), y_offset=(0, 5, 1), beta=0.0),
    case("add_box", [A(), Nan()], x_offset=(), y_offset=(), beta=0.0),
    case("reshape_box", [A(4, 3), Nan(3, 2)], x_offset=(2, 0), y_offset=(3, 0), x_shape=(6, 3), y_shape=(6, 3), beta=0.0),
    case("reshape_box", [A(3, 2), A(2, 5)], x_offset=(3, 1), y_offset=(0, 1), x_shape=(6, 4), y_shape=(4, 6), beta=1.0),
    case("reshape_box", [A(2, 2, 2), Nan(4, 3)], x_offset=(0, 1, 0), y_offset=(4, 0), x_shape=(2, 3, 4), y_shape=(8, 3), beta=0.0),
    case("reshape_box", [A(3, 4), A(2, 3, 2)], x_offset=(3, 0), y_offset=(1, 0, 1), x_shape=(6, 4), y_shape=(3, 4, 2), beta=-0.5),
    case("reshape_box", [A(1, 1), Nan()], x_offset=(0, 0), y_offset=(), x_shape=(1, 1), y_shape=(), beta=0.0),
    case("reshaped_call", [A(6), Nan(3, 2)], view_kernel="scale", view_shapes=((0, (3, 2)),), alpha=2.0),
    case("reshaped_call", [A(2, 3), A(6)], view_kernel="add_box", view_shapes=((1, (2, 3)),), x_offset=(0, 0), y_offset=(0, 1), beta=0.5),
    case("conv2d_inplace", [A(6, 5, 3, 2), A(3, 2, 3, 4), Nan(4, 4, 4, 2)], padding=(0, 0), stride=(1, 1), dilation=(1, 1), x_start=(0, 0), c_start=(0, 0), y_start=(0, 0)),
    case("conv2d_inplace", [A(4, 3, 2, 2), A(2, 3, 2, 3), A(3, 4, 3, 2)], alpha=0.5, beta=0.5, padding=(1, 2), stride=(2, 1), dilation=(1, 2), x_start=(2, 1), c_start=(1, 0), y_start=(1, 0)),
    case("conv2d_bwd_input_inplace", [A(4, 4, 4, 2), A(3, 2, 3, 4), Nan(6, 5, 3, 2)], padding=(0, 0), stride=(1, 1), dilation=(1, 1), x_start=(0, 0), c_start=(0, 0), y_start=(0, 0)),
    case("conv2d_bwd_input_inplace", [A(3, 4, 3, 2), A(2, 3, 2, 3), A(4, 3, 2, 2)], alpha=2.0, beta=1.0, padding=(1, 2), stride=(2, 1), dilation=(1, 2), x_start=(2, 1), c_start=(1, 0), y_start=(1, 0)),
    case("conv2d_bwd_weight_inplace", [A(6, 5, 3, 2), A(4, 4, 4, 2), Nan(3, 2, 3, 4)], padding=(0, 0), stride=(1, 1), dilation=(1, 1), x_start=(0, 0), c_start=(0, 0), y_start=(0, 0)),
    case("conv2d_bwd_weight_inplace", [A(4, 3, 2, 2), A(3, 4, 3, 2), A(2, 3, 2, 3)], alpha=-1.0, beta=1.0, padding=(1, 2), stride=(2, 1), dilation=(1, 2), x_start=(2, 1), c_start=(1, 0), y_start=(1, 0)),
    case("copy_intersection", [A(4, 3), A(5, 2)], src_start=(1, 0), dst_start=(0, 1)),
    case("copy_intersection", [A(4, 3, 2), A(2, 2, 2)], src_start=(0, 0, 0), dst_start=(5, 0, 0)),
]
# fmt: on

DTYPES = ("float32", "float64", "float16")
# (rtol, atol) of a backend against the reference; fp16 backends may compute in fp32.
TOLERANCE = {"float16": (2e-2, 2e-2), "float32": (2e-5, 2e-5), "float64": (1e-12, 1e-12)}


def make_arrays(args, dtype, seed=0):
    """Fresh F-ordered arrays for a case; `same` entries are the aliased objects themselves."""
    rng = np.random.default_rng(seed)
    arrays = []
    for arg in args:
        if arg.kind == "same":
            arrays.append(arrays[arg.low])
            continue
        values = {
            "normal": lambda a: rng.standard_normal(a.shape),
            "positive": lambda a: rng.uniform(0.5, 2.0, a.shape),
            "zeros": lambda a: np.zeros(a.shape),
            "masked": lambda a: masked_values(rng, a.shape),
            "neginf": lambda a: np.full(a.shape, -np.inf),
            "garbage": lambda a: np.full(a.shape, np.nan),
            "unread": lambda a: np.full(a.shape, np.nan),
            "index": lambda a: rng.integers(a.low, a.high, a.shape),
            "mask": lambda a: rng.random(a.shape) < 0.7,
            "labels": lambda a: np.where(rng.random(a.shape) < 0.25, -100,
                                         rng.integers(a.low, a.high, a.shape)),
            "step": lambda a: np.array(a.high),
        }[arg.kind](arg)
        # np.array keeps 0-d arrays 0-d (np.asfortranarray would make them 1-d).
        arrays.append(np.array(values, dtype=arg.dtype or dtype, order="F"))
    return arrays


def masked_values(rng, shape):
    values = rng.standard_normal(shape)
    values[rng.random(shape) < 0.3] = -np.inf
    if len(shape) >= 2:
        values[..., 0] = -np.inf
    return values


def distinct(arrays):
    """Positions of the first occurrence of each array object."""
    seen, positions = set(), []
    for position, array in enumerate(arrays):
        if id(array) not in seen:
            seen.add(id(array))
            positions.append(position)
    return positions
