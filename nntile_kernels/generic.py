"""Kernels written once against an array module `xp` (NumPy or CuPy): the shared core
of the reference and cuda tables, built by `table(xp, special)`.

Arrays only: never imports nntile_spmd, mpi4py, numba or cupy (the caller passes its
array module). Each kernel takes `xp` first; the table binds it. Calling convention:
``KERNELS[name](*inputs, *outputs, **params)`` writes the outputs in place and returns
None; an output may be the same object as an input; with ``beta == 0`` an output's
previous contents are never read. Nothing here synchronizes a CuPy stream but the
embedding's id check (generic_embedding.py) and the losses' label checks (their rules'
`Check`): scalars that live in tiles stay 0-d arrays.
"""

import functools

from . import (KERNEL_NAMES, generic_conv, generic_data, generic_embedding, generic_math,
               generic_slice)
from .generic_common import fiber_axes, store, wide
from .layout import gemm_folds
from .rounding import round_operand
from .formulas import (BROADCAST, ELEMENTWISE, EXP_REDUCTIONS, FROM_LSE, INDEXED, LOSSES,
                       PICKED, PICKED_FROM_LSE, REDUCTIONS, UPDATES)
from .rules import ArrayRule, ArrayUpdate, rule_namespace
from .rules_broadcast import ArrayBroadcast
from .rules_indexed import AfterLogsumexp, ArrayIndexed
from .rules_picked import PICKED_KEYWORDS, ArrayPicked
from .rules_reduce import ArrayReduction
from .rules_softmax import ArrayExpReduction

# ---------------------------------------------------------------- products


def _batch_first(x, shape3, trans):
    """F-order (rows, cols, batch) view of a gemm operand as (batch, op rows, op cols)."""
    return x.reshape(shape3, order="F").transpose((2, 1, 0) if trans else (2, 0, 1))


def gemm(xp, a, b, c, *, alpha=1.0, beta=0.0, trans_a=False, trans_b=False, ndim=1,
         batch_ndim=0, compute_type=None):
    """c = alpha*op(a)·op(b) + beta*c with NNTile's multi-dim and batch rules;
    compute_type (tf32, bf16, fp16) rounds fp32 inputs first (rounding.py)."""
    a, b = round_operand(xp, a, compute_type), round_operand(xp, b, compute_type)
    a3, b3, _ = gemm_folds(a.shape, b.shape, trans_a, trans_b, ndim, batch_ndim)
    carried = wide(xp, c.dtype)
    product = xp.matmul(_batch_first(a, a3, trans_a).astype(carried, copy=False),
                        _batch_first(b, b3, trans_b).astype(carried, copy=False))
    product = product.transpose(1, 2, 0).reshape(c.shape, order="F")  # (m, n, batch)
    store(c, product, beta, c, alpha)


def transpose(xp, x, y, *, alpha=1.0, ndim):
    """y = alpha * x with its first `ndim` dims moved to the end."""
    order = tuple(range(ndim, x.ndim)) + tuple(range(ndim))
    y[...] = alpha * xp.transpose(x, order)


def permute(xp, x, y, *, alpha=1.0, perm):
    """y = alpha * x with its dims permuted: y's dim i is x's dim perm[i] (NumPy's
    transpose(x, perm))."""
    y[...] = alpha * xp.transpose(x, tuple(perm))


# ---------------------------------------------------------------- elementwise
# The activations and their backwards, add, multiply, scale, clear, fill, pow and
# add_scalar are rules (formulas/elementwise.py), not functions here.


def copy(xp, x, y):
    """y = x."""
    xp.copyto(y, x)


def cast(xp, x, y):
    """y = x converted to y.dtype."""
    xp.copyto(y, x, casting="unsafe")


# ---------------------------------------------------------------- reductions
# sum, sum_slice, sum_fiber, ... are reduction rules (formulas/reductions.py).


def add_fiber(xp, x, y, z, *, axis, batch_ndim=0, alpha=1.0, beta=0.0):
    """z = alpha*x (broadcast along all dims but `axis` and the batch dims) + beta*y.

    The cuda table's add_fiber (as generic_slice.add_slice): CuPy's fused store is one
    launch where the rule's array expressions (ArrayBroadcast) make three."""
    expanded = xp.expand_dims(x, fiber_axes(y.ndim, axis, batch_ndim))
    store(z, expanded, beta, y, alpha)


def softmax_backward(xp, table, y, dy, dx, *, axis):
    """dx += y * (dy - d), d = sum(y * dy along `axis`): the backward of y = softmax(x)
    as two rules of `table` (formulas/reductions.py), the reduction sumprod_slice (d in
    float64, stored in the tile dtype) then the broadcast softmax_from_logsumexp_backward,
    whose formula this is."""
    d = xp.empty(y.shape[:axis] + y.shape[axis + 1:], y.dtype, order="F")
    table["sumprod_slice"](y, dy, d, axis=axis)
    table["softmax_from_logsumexp_backward"](y, dy, d, dx, axis=axis)


# ---------------------------------------------------------------- the table


def table(xp, special):
    """Every kernel of KERNEL_NAMES on `xp` arrays; `special` is its scipy.special."""
    functions = {**vars(generic_embedding), **vars(generic_slice),
                 **vars(generic_conv), **vars(generic_data), **globals()}
    namespace = rule_namespace(xp, special)
    kernels = generic_math.table(xp)    # randn, dropout
    # kernels calling this very table's (the table is complete when they run): a kernel on
    # reshaped tiles, and softmax_backward's two rules
    kernels["reshaped_call"] = functools.partial(generic_data.reshaped_call, kernels)
    kernels["softmax_backward"] = functools.partial(softmax_backward, xp, kernels)
    for name in KERNEL_NAMES:
        if name in kernels:
            continue
        if name in ELEMENTWISE:
            kernels[name] = ArrayRule(name, ELEMENTWISE[name], namespace)
        elif name in UPDATES:
            kernels[name] = ArrayUpdate(name, UPDATES[name], namespace)
        elif name in BROADCAST:   # add_slice, multiply_fiber, ...: rules_broadcast.py's kind
            kernels[name] = ArrayBroadcast(name, BROADCAST[name], namespace)
        elif name in REDUCTIONS:   # sum_slice, sumprod_fiber, ...: rules_reduce.py's kind
            kernels[name] = ArrayReduction(name, REDUCTIONS[name], namespace)
        elif name in INDEXED or name in LOSSES:   # the masks, rope, a loss: rules_indexed.py's kind
            kernels[name] = ArrayIndexed(name, {**INDEXED, **LOSSES}[name], namespace)
        elif name in PICKED:   # cross_entropy_lse: rules_picked.py's kind
            kernels[name] = ArrayPicked(name, PICKED[name], namespace)
        elif name in FROM_LSE:   # this table's logsumexp, then a rule of rules_indexed.py
            rule = ArrayIndexed(name, FROM_LSE[name], namespace)
            kernels[name] = AfterLogsumexp(name, rule, kernels, xp.empty)
        elif name in PICKED_FROM_LSE:   # the same, then a rule of rules_picked.py
            rule = ArrayPicked(name, PICKED_FROM_LSE[name], namespace)
            kernels[name] = AfterLogsumexp(name, rule, kernels, xp.empty, PICKED_KEYWORDS)
        elif name in EXP_REDUCTIONS:   # softmax, logsumexp, maxsumexp: rules_softmax.py's kind
            kernels[name] = ArrayExpReduction(name, EXP_REDUCTIONS[name], namespace)
        else:
            assert functions[name].__module__.startswith(__name__), f"{name} is a kernel here"
            kernels[name] = functools.partial(functions[name], xp)
    return kernels
