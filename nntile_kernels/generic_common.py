"""Helpers of the xp-generic kernels (generic*.py): output stores, widening, fiber axes.

Arrays only, and not even an array module: these work on NumPy and CuPy alike.
"""


# array type -> a one-pass store(out, value, beta, previous, alpha) that returns False
# where it does not take the operands; cuda.py registers CuPy's
FUSED_STORES = {}


def store(out, value, beta, previous, alpha=1.0):
    """out = alpha*value + beta*previous, never reading `previous` when beta == 0 (may be
    garbage). An array expression makes a pass and a temporary per operator, a kernel
    launch each on a GPU: a fused store for the array type does it in one."""
    fused = FUSED_STORES.get(type(out))
    if fused is not None and fused(out, value, beta, previous, alpha):
        return
    scaled = value if alpha == 1.0 else alpha * value
    if beta == 0.0:
        out[...] = scaled
    else:
        out[...] = scaled + beta * previous


def wide(xp, dtype):
    """Dtype that products and sums are carried in: fp16 is widened to fp32."""
    return xp.float32 if dtype == xp.float16 else dtype


def fiber_axes(ndim, axis, batch_ndim):
    """Axes a fiber kernel reduces or broadcasts over: all but `axis` and the batch dims."""
    return tuple(i for i in range(ndim - batch_ndim) if i != axis)
