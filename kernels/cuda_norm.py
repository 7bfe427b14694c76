"""CuPy kernels of the cuda table for the fiber products and pow (LayerNorm's primitives).

Part of the cuda table (cuda.py imports these). Arrays only: imports CuPy, never
nntile_spmd or mpi4py; the same calling convention as kernels.reference (its
reference_norm.py). Nothing here synchronizes the stream. A fiber of x along `axis` is
indexed by that axis and x's trailing `batch_ndim` dims; expand_dims broadcasts it.
"""

try:
    import cupy as cp
except ImportError as error:  # only this backend needs CuPy
    raise ImportError(
        "kernels.cuda needs CuPy with a working CUDA install (e.g. `pip install cupy-cuda12x`); "
        "use kernels.get_kernels('cpu') on machines without an NVIDIA GPU"
    ) from error


def _store(out, value, beta, previous):
    """out = value + beta*previous, never reading `previous` when beta == 0 (may be garbage)."""
    if beta == 0.0:
        out[...] = value
    else:
        out[...] = value + beta * previous


def _spread(f, ndim, axis, batch_ndim):
    """The fiber f as an array that broadcasts against a full tensor of `ndim` dims."""
    return cp.expand_dims(f, tuple(i for i in range(ndim - batch_ndim) if i != axis))


def multiply_fiber(f, x, z, *, axis, batch_ndim=0, alpha=1.0):
    """z = alpha * f (broadcast along all dims but `axis` and the batch dims) * x."""
    z[...] = alpha * _spread(f, x.ndim, axis, batch_ndim) * x


def sumprod_fiber(x, y, f, *, axis, batch_ndim=0, alpha=1.0, beta=0.0):
    """f = alpha * sum of x*y over all dims but `axis` and the batch dims + beta*f."""
    wide = cp.float32 if x.dtype == cp.float16 else x.dtype   # fp16 products in fp32
    other = tuple(i for i in range(x.ndim - batch_ndim) if i != axis)
    total = (x.astype(wide, copy=False) * y).sum(axis=other, dtype=cp.float64)
    _store(f, alpha * total, beta, f)


def sumprod_fiber_backward(f, x, dx, *, axis, batch_ndim=0, alpha=1.0):
    """dx += alpha * f (broadcast) * x."""
    dx += alpha * _spread(f, x.ndim, axis, batch_ndim) * x


def pow(x, y, *, alpha=1.0, exp=1.0):  # noqa: A001 - the kernel's name in every table
    """y = alpha * x**exp."""
    y[...] = alpha * cp.power(x, exp)


def pow_backward(x, dy, dx, *, alpha=1.0, exp=1.0):
    """dx += alpha * exp * x**(exp - 1) * dy."""
    dx += (alpha * exp) * cp.power(x, exp - 1.0) * dy
