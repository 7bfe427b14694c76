"""Graph layer: builders of the data-movement ops, re-exported by `nntile_spmd.ops`.
"""

from __future__ import annotations

from ..apply import apply
from ..checks import require_axis, require_same_dtype
from ..registry import op_error


def slice(x, y, axis, start, stop, beta=0.0):  # noqa: A001 - NNTile's name
    """y = x[start:stop] along `axis` (+ beta*y); y is a new tensor's name or a tensor."""
    return apply("slice", [x], [y], axis=axis, start=start, stop=stop, beta=beta)


def slice_backward(dy, dx, axis, start, beta=1.0):
    """dx[start:start + len] along `axis` = dy + beta*that part; elsewhere dx = beta*dx.

    With beta = 1 (the default) it adds dy into its place in dx: slice's gradient."""
    size = dx.shape[axis] if 0 <= axis < dx.ndim else None
    return apply("slice_backward", [dy], [dx], axis=axis, start=start, size=size, beta=beta)


def concat(xs, name, axis=0):
    """y = the tensors `xs` one after another along `axis` (their other dims agree)."""
    xs = list(xs)
    if not xs:
        raise op_error("concat", "needs at least one tensor")
    first = xs[0]
    require_same_dtype("concat", *xs)
    require_axis("concat", axis, first.ndim, xs)
    for x in xs:
        if x.ndim != first.ndim or \
                x.shape[:axis] + x.shape[axis + 1:] != first.shape[:axis] + first.shape[axis + 1:]:
            raise op_error("concat", f"{x.name} must match {first.name} in every dim but "
                           f"axis {axis}", xs)
        if not isinstance(x.shape[axis], int):
            raise op_error("concat", f"{x.name}'s axis {axis} must have a concrete size", xs)
    if first.graph.has_tensor(name):
        raise op_error("concat", f"tensor name {name!r} is already in use", xs)
    total = sum(x.shape[axis] for x in xs)
    y = first.graph.tensor(first.shape[:axis] + (total,) + first.shape[axis + 1:], name,
                           first.dtype)
    apply("clear", [], [y])
    start = 0
    for x in xs:   # each part adds into its own range, so the order does not matter
        slice_backward(x, y, axis, start, beta=1.0)
        start += x.shape[axis]
    return y


def reshape(x, y, shape, beta=0.0):
    """y = x's elements in column-major order, shaped `shape` (+ beta*y)."""
    return apply("reshape", [x], [y], shape=tuple(shape) if isinstance(shape, list) else shape,
                 beta=beta)


def gather(x, y, beta=0.0):
    """y = x (+ beta*y) where y is one tile: every tile of x meets on y's owner."""
    return apply("gather", [x], [y], beta=beta)


def scatter(x, y, beta=0.0):
    """y = x (+ beta*y) where x is one tile: y's tiles are cut from it on their owners."""
    return apply("scatter", [x], [y], beta=beta)


def log_scalar(x, name):
    """Record the value of the 0-d tensor x at this point of the program under `name`.

    The value is copied into a 0-d output tensor `name`; after an execute,
    `cg.logged_scalars()` returns {name: value} of every log_scalar (collective).
    """
    logged = apply("log_scalar", [x], [name])
    logged.mark_output()
    return logged


# -- embedding ----------------------------------------------------------------
def embedding(index, vocab, name, axis=0):
    """y = vocab columns picked by `index`, the embed dim inserted at `axis`."""
    return apply("embedding", [index, vocab], [name], axis=axis)


def embedding_backward(index, grad_output, grad_vocab, axis=0):
    """grad_vocab[:, index] += grad_output (accumulates)."""
    return apply("embedding_backward", [index, grad_output], [grad_vocab], axis=axis)
