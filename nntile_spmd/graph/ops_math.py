"""Graph layer: builders of the seed elementwise ops and reductions (rules_math.py),
re-exported by `nntile_spmd.ops`.

mean, max and min reduce over the given axes (seed 003) as a chain of one-axis
reductions, each of which lets its axis be split over tiles and ranks.
"""

from __future__ import annotations

from .apply import apply
from .ops_slice import sum_slice
from .registry import op_error
from .tensor import TensorNode


def sub(x, y, name):
    """z = x - y."""
    return apply("sub", [x, y], [name])


def div(x, y, name):
    """z = x / y."""
    return apply("div", [x, y], [name])


def hypot(alpha, x, beta, y, name):
    """z = hypot(alpha*x, beta*y) = sqrt((alpha*x)^2 + (beta*y)^2) (NNTile's hypot)."""
    return apply("hypot", [x, y], [name], alpha=alpha, beta=beta)


def hypot_inplace(alpha, x, beta, y):
    """y = hypot(alpha*x, beta*y)."""
    return apply("hypot_inplace", [x, y], [y], alpha=alpha, beta=beta)


def hypot_backward(x, z, grad_z, grad_x, alpha=1.0):
    """grad_x += alpha^2 * x / z * grad_z where z = hypot(alpha*x, ...) (0 where z == 0)."""
    return apply("hypot_backward", [x, z, grad_z], [grad_x], alpha=alpha)


def hypot_scalar_inverse(eps, alpha, x):
    """x = 1 / hypot(alpha*x, eps), in place (NNTile's hypot_scalar_inverse)."""
    return apply("hypot_scalar_inverse", [x], [x], eps=eps, alpha=alpha)


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


def max(x, name, axes=0):  # noqa: A001 - seed name
    """y = max of x over `axes` (those dims removed); its gradient goes to the maxima, ties
    sharing it equally."""
    return chain("max", x, name, axes, lambda t, out, axis: apply("max", [t], [out], axis=axis))


def min(x, name, axes=0):  # noqa: A001 - seed name
    """y = min of x over `axes` (those dims removed); its gradient goes to the minima, ties
    sharing it equally."""
    return chain("min", x, name, axes, lambda t, out, axis: apply("min", [t], [out], axis=axis))


# -- fibers and sum's gradient (rules_math_fiber.py) -------------------------------------
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


# -- random numbers (rules_random.py) ----------------------------------------------------
def randn(dst, seed, mean=0.0, stddev=1.0, start=None, underlying_shape=None):
    """dst = mean + stddev * N(0, 1): the block of dst's shape at `start` (default 0s) of a
    normal tensor of `underlying_shape` (default dst's shape) keyed by the int `seed`
    (NNTile's randn). Element i (F-order) of that tensor is always the same number, on
    any tiling and rank count."""
    check_randn(dst, seed, start, underlying_shape)
    return apply("randn", [], [dst], seed=seed, mean=mean, stddev=stddev,
                 start=None if start is None else tuple(start),
                 underlying_shape=None if underlying_shape is None else tuple(underlying_shape))


def check_randn(dst, seed, start, underlying_shape):
    if not isinstance(dst, TensorNode):
        raise op_error("randn", f"dst must be an existing tensor, not {dst!r}", (), TypeError)
    tensors = (dst,)
    if not isinstance(seed, int) or seed < 0:
        raise op_error("randn", f"seed={seed!r} must be an int >= 0", tensors)
    start = (0,) * dst.ndim if start is None else tuple(start)
    whole = dst.shape if underlying_shape is None else tuple(underlying_shape)
    if len(start) != dst.ndim or len(whole) != dst.ndim:
        raise op_error("randn", f"start={start} and underlying_shape={whole} must have "
                       f"{dst.ndim} entries", tensors)
    if any(s < 0 or s + size > w for s, size, w in zip(start, dst.shape, whole)):
        raise op_error("randn", f"the block at start={start} does not fit in "
                       f"underlying_shape={whole}", tensors)


def dropout(x, name, p, seed, step=0.0):
    """y = x / (1 - p) where a uniform number keyed by (seed, step) and the element's index
    in x exceeds p, else 0 (inverted dropout). The mask is a function of that index, so
    every tiling and rank count draws the same one, and backward draws it again. `p` and
    `step` may be runtime Scalars (a training loop changes the step between executes and
    switches dropout off with p = 0, which is the identity); `seed` tells the dropout
    sites of one graph apart. y keeps x's block-sparse (causal) structure."""
    check_dropout(x, p, seed, step)
    y = apply("dropout", [x], [name], p=p, seed=seed, step=step)
    y.causal_dims = x.causal_dims
    return y


def check_dropout(x, p, seed, step):
    tensors = (x,) if isinstance(x, TensorNode) else ()
    if not isinstance(x, TensorNode):
        raise op_error("dropout", f"x must be a tensor, not {x!r}", tensors, TypeError)
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise op_error("dropout", f"seed={seed!r} must be an int >= 0", tensors)
    for what, value in (("p", p), ("step", step)):
        default = getattr(value, "default", value) * getattr(value, "factor", 1.0)
        if isinstance(default, bool) or not isinstance(default, (int, float)):
            raise op_error("dropout", f"{what}={value!r} must be a float or a Scalar",
                           tensors, TypeError)
    factor = getattr(p, "factor", None)
    if not 0.0 <= (p if factor is None else factor) < 1.0:
        raise op_error("dropout", f"p={p!r} must be in [0, 1) (a Scalar: its factor, the "
                       "largest p it can give when its value is 1)", tensors)
