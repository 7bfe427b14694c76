"""Graph layer: builders of the reductions family (entries in rules.py and
slice_rules.py), re-exported by `nntile_spmd.ops`.

mean, max and min reduce over the given axes as a chain of one-axis reductions, each of
which lets its axis be split over tiles and ranks.

total_sum_accum is NNTile's accumulation of the cross-entropy sum: cross_entropy_lse
with count = 1/alpha accumulating into val (beta = 1), so it reuses that op's kernels and
tiling.
"""

from __future__ import annotations

import numbers

from ..apply import apply
from ..dtypes import FLOAT_DTYPES
from ..registry import op_error
from ..tensor import TensorNode


# -- reductions and fibers -----------------------------------------------------
def sum(x, y, alpha=1.0, beta=0.0):  # noqa: A001 - NNTile's name
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


def sumprod_slice(x, y, name, axis=0, alpha=1.0, beta=0.0):
    """z = alpha * sum over `axis` of x*y (that axis removed) + beta*z.

    `name` is a new tensor's name, or an existing tensor z to accumulate into (beta != 0).
    """
    return apply("sumprod_slice", [x, y], [name], axis=axis, alpha=alpha, beta=beta)


def sumprod_slice_backward(slice_grad, x, grad_y, axis=0, alpha=1.0):
    """grad_y += alpha * slice_grad (broadcast along `axis`) * x: the gradient of
    sumprod_slice's output with respect to its other factor y."""
    return apply("sumprod_slice_backward", [slice_grad, x], [grad_y], axis=axis, alpha=alpha)


def sum_slice(x, name, axis=0, alpha=1.0, beta=0.0):
    """s = alpha * sum of x over `axis` (that axis removed) + beta*s.

    `name` is a new tensor's name, or an existing tensor s to accumulate into (beta != 0).
    """
    return apply("sum_slice", [x], [name], axis=axis, alpha=alpha, beta=beta)


def add_slice(alpha, s, beta, x, name, axis=0):
    """z = alpha * s (a slice of x, broadcast along `axis`) + beta*x."""
    return apply("add_slice", [s, x], [name], axis=axis, alpha=alpha, beta=beta)


def add_slice_inplace(alpha, s, beta, x, axis=0):
    """x = alpha * s (a slice of x, broadcast along `axis`) + beta*x."""
    return apply("add_slice_inplace", [s, x], [x], axis=axis, alpha=alpha, beta=beta)


def multiply_slice(s, x, name, axis=0, alpha=1.0):
    """z = alpha * s (a slice of x, broadcast along `axis`) * x."""
    return apply("multiply_slice", [s, x], [name], axis=axis, alpha=alpha)


def logsumexp(x, name, axis=0, beta=0.0):
    """y = log(sum(exp(x))) along `axis` (that axis removed), computed stably.

    With an existing tensor y as `name` and beta > 0: y = log(exp(logsumexp(x)) + beta*exp(y))
    (beta=1 is logaddexp). The axis may be split over tiles and ranks: partial results
    are merged by logaddexp; a slice of all -inf gives -inf, never nan.
    """
    return apply("logsumexp", [x], [name], axis=axis, beta=beta)


def logsumexp_backward(x, y, grad_y, grad_x, axis=0):
    """grad_x += exp(x - y) * grad_y, y and grad_y broadcast along `axis`; y = logsumexp(x)."""
    return apply("logsumexp_backward", [x, y, grad_y], [grad_x], axis=axis)


def softmax_from_logsumexp(lse, x, name, axis=0):
    """y = exp(x - lse), lse broadcast along `axis`: the softmax of x along `axis`.

    lse must be logsumexp(x, axis) (as computed by ops.logsumexp): the op is elementwise
    per tile, so the axis may be split over tiles and ranks, and its backward rule is
    softmax's total derivative, which holds only for that lse (lse gets no gradient).
    """
    return apply("softmax_from_logsumexp", [lse, x], [name], axis=axis)


def softmax_from_logsumexp_backward(y, grad_y, dot, grad_x, axis=0):
    """grad_x += y * (grad_y - dot), dot broadcast along `axis`; with
    dot = sumprod_slice(y, grad_y, axis) this is softmax's backward."""
    return apply("softmax_from_logsumexp_backward", [y, grad_y, dot], [grad_x], axis=axis)


def multiply_fiber(f, x, name, axis=0, batch_ndim=0, alpha=1.0):
    """z = alpha * f (the fiber of x along `axis`, broadcast) * x."""
    return apply("multiply_fiber", [f, x], [name], axis=axis, batch_ndim=batch_ndim,
                 alpha=alpha)


def sumprod_fiber(x, y, name, axis=0, batch_ndim=0, alpha=1.0, beta=0.0):
    """f = alpha * sum of x*y over all dims but `axis` and the batch dims + beta*f.

    `name` is a new tensor's name, or an existing fiber f to accumulate into (beta != 0).
    """
    return apply("sumprod_fiber", [x, y], [name], axis=axis, batch_ndim=batch_ndim,
                 alpha=alpha, beta=beta)


def sumprod_fiber_backward(fiber_grad, x, grad_y, axis=0, batch_ndim=0, alpha=1.0):
    """grad_y += alpha * fiber_grad (broadcast) * x: the gradient of sumprod_fiber's
    output with respect to its other factor y (and multiply_fiber's dx)."""
    return apply("sumprod_fiber_backward", [fiber_grad, x], [grad_y], axis=axis,
                 batch_ndim=batch_ndim, alpha=alpha)


def norm_slice(alpha, x, name, axis=0, beta=0.0):
    """y = hypot(alpha * 2-norm of x along `axis`, beta*y); `name` is a new tensor's name,
    or an existing y to merge into (beta != 0)."""
    return apply("norm_slice", [x], [name], axis=axis, alpha=alpha, beta=beta)


def norm_slice_inplace(alpha, x, beta, y, axis=0):
    """y = hypot(alpha * 2-norm of x along `axis`, beta*y) (NNTile's norm_slice_inplace)."""
    return apply("norm_slice_inplace", [x], [y], axis=axis, alpha=alpha, beta=beta)


def norm_slice_backward(x, y, grad_y, grad_x, axis=0, alpha=1.0):
    """grad_x += alpha^2 * x / y * grad_y (broadcast along `axis`), y = norm_slice(alpha, x)."""
    return apply("norm_slice_backward", [x, y, grad_y], [grad_x], axis=axis, alpha=alpha)


def extremum_count(x, y, name, axis=0):
    """count = how many entries of x along `axis` equal y (x's max or min along it)."""
    return apply("extremum_count", [x, y], [name], axis=axis)


def extremum_backward(x, y, count, grad_y, grad_x, axis=0):
    """grad_x += grad_y / count where x equals its extremum y along `axis` (ties share)."""
    return apply("extremum_backward", [x, y, count, grad_y], [grad_x], axis=axis)


def reduce_axes(op, x, axes):
    """`axes` (an int, a sequence, or None for all) as distinct valid axes of x, largest
    first: removing a larger axis first keeps the smaller ones' positions."""
    axes = tuple(range(x.ndim)) if axes is None else (axes,) if isinstance(axes, int) \
        else tuple(axes)
    if not axes or any(not isinstance(a, int) or not 0 <= a < x.ndim for a in axes) or \
            len(set(axes)) != len(axes):
        raise op_error(op, f"axes={axes!r} must be distinct axes in [0, {x.ndim})", (x,))
    return sorted(axes, reverse=True)


def chain(op, x, name, axes, reduce_one):
    """Reduce x over `axes` one axis at a time; intermediates are named f"{name}_{axis}"."""
    order = reduce_axes(op, x, axes)
    for position, axis in enumerate(order):
        last = position == len(order) - 1
        x = reduce_one(x, name if last else f"{name}_{axis}", axis)
    return x


def mean(x, name, axes=0):
    """y = mean of x over `axes` (those dims removed; None: all, a 0-d y): sum_slice with
    alpha = 1/size per axis."""
    def one(t, out, axis):
        size = t.shape[axis]
        if not isinstance(size, int):
            raise op_error("mean", f"axis {axis} must have a concrete size, not the symbol "
                           f"{size!r} (bind it first)", (t,))
        return sum_slice(t, out, axis, alpha=1.0 / size)
    return chain("mean", x, name, axes, one)


def max(x, name, axes=0):  # noqa: A001 - NNTile's name
    """y = max of x over `axes` (those dims removed); its gradient goes to the maxima, ties
    sharing it equally."""
    return chain("max", x, name, axes, lambda t, out, axis: apply("max", [t], [out], axis=axis))


def min(x, name, axes=0):  # noqa: A001 - NNTile's name
    """y = min of x over `axes` (those dims removed); its gradient goes to the minima, ties
    sharing it equally."""
    return chain("min", x, name, axes, lambda t, out, axis: apply("min", [t], [out], axis=axis))


# -- fibers and sum's gradient -------------------------------------------------------
def scale_fiber(alpha, src, dst, axis=0, batch_ndim=0, shape=None):
    """dst = alpha * src broadcast along every dim but `axis` and the batch dims (NNTile's
    scale_fiber). dst is an existing tensor, or the name of a new one of shape `shape`."""
    if isinstance(dst, TensorNode):
        shape = dst.shape if shape is None else shape
    elif shape is None:
        raise op_error("scale_fiber", f"a new output {dst!r} needs shape=, as a fiber does "
                       "not tell the other dims", (src,), TypeError)
    return apply("scale_fiber", [src], [dst], alpha=alpha, axis=axis, batch_ndim=batch_ndim,
                 shape=tuple(shape))


def norm_fiber(alpha, x, name, axis=0, batch_ndim=0, beta=0.0):
    """y = hypot(alpha * 2-norm of x over every dim but `axis` and the batch dims, beta*y);
    `name` is a new tensor's name, or an existing y to merge into (beta != 0)."""
    return apply("norm_fiber", [x], [name], axis=axis, batch_ndim=batch_ndim, alpha=alpha,
                 beta=beta)


def norm_fiber_inplace(alpha, x, beta, y, axis=0, batch_ndim=0):
    """y = hypot(alpha * 2-norm of x over every dim but the fiber's, beta*y) (NNTile's
    norm_fiber_inplace)."""
    return apply("norm_fiber_inplace", [x], [y], axis=axis, batch_ndim=batch_ndim,
                 alpha=alpha, beta=beta)


def norm_fiber_backward(x, y, grad_y, grad_x, axis=0, batch_ndim=0, alpha=1.0):
    """grad_x += alpha^2 * x / y * grad_y (fibers broadcast), y = norm_fiber(alpha, x)."""
    return apply("norm_fiber_backward", [x, y, grad_y], [grad_x], axis=axis,
                 batch_ndim=batch_ndim, alpha=alpha)


def sum_backward(grad_sum, grad_x, alpha=1.0):
    """grad_x += alpha * grad_sum, a 0-d gradient broadcast everywhere (sum's gradient)."""
    return apply("sum_backward", [grad_sum, grad_x], [grad_x], alpha=alpha)


def total_sum_accum(alpha, logsumexp, src, class_labels, val, ignore_index=-100):
    """val += alpha * sum over labels != ignore_index of (logsumexp - src[label, ...])
    (NNTile's total_sum_accum): src [classes, batch...], logsumexp and class_labels
    [batch...], val an existing 0-d tensor. Shape mistakes are reported by the
    cross_entropy_lse op it adds."""
    check_total_sum_accum(alpha, src, val)
    graph = val.graph
    name, index = f"{val.name}_inverse_alpha", 1
    while graph.has_tensor(name):   # one constant per call: the graph may hold several
        name, index = f"{val.name}_inverse_alpha{index}", index + 1
    inverse = graph.tensor([], name, val.dtype)
    apply("fill", [], [inverse], value=1.0 / alpha)
    return apply("cross_entropy_lse", [src, logsumexp, class_labels, inverse], [val],
                 ignore_index=ignore_index, beta=1.0)


def check_total_sum_accum(alpha, src, val):
    """total_sum_accum's own mistakes raise before any op is added."""
    if not isinstance(val, TensorNode):
        raise op_error("total_sum_accum", f"val must be an existing 0-d tensor, not {val!r}",
                       (src,), TypeError)
    tensors = (src, val)
    if val.shape != () or val.dtype not in FLOAT_DTYPES:
        raise op_error("total_sum_accum", f"{val.name} must be a 0-d floating-point tensor",
                       tensors)
    if not isinstance(alpha, numbers.Real) or alpha == 0:
        raise op_error("total_sum_accum", f"alpha={alpha!r} must be a nonzero real number",
                       tensors)
