"""Helpers of the xp-generic kernels (generic*.py): output stores, widening, fiber axes.

Arrays only, and not even an array module: these work on NumPy and CuPy alike.
"""


def store(out, value, beta, previous):
    """out = value + beta*previous, never reading `previous` when beta == 0 (may be garbage)."""
    if beta == 0.0:
        out[...] = value
    else:
        out[...] = value + beta * previous


def wide(xp, dtype):
    """Dtype that products and sums are carried in: fp16 is widened to fp32."""
    return xp.float32 if dtype == xp.float16 else dtype


def fiber_axes(ndim, axis, batch_ndim):
    """Axes a fiber kernel reduces or broadcasts over: all but `axis` and the batch dims."""
    return tuple(i for i in range(ndim - batch_ndim) if i != axis)
