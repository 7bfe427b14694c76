"""CuPy kernels of the cuda table for rope, rope_backward and scale_slice.

Arrays only: imports CuPy, never nntile_spmd or mpi4py; the same calling convention
and the same F-order folds as kernels.reference_rope (CuPy reshapes F-contiguous
tiles to views as NumPy does), so each kernel is a few elementwise passes.
"""

try:
    import cupy as cp
except ImportError as error:  # only this backend needs CuPy
    raise ImportError(
        "kernels.cuda needs CuPy with a working CUDA install (e.g. `pip install cupy-cuda12x`); "
        "use kernels.get_kernels('cpu') on machines without an NVIDIA GPU"
    ) from error


def _pairs(tile, tables):
    """(even, odd) views of `tile` folded F-order to (2, head_dim/2, rest, broadcast)."""
    rest = 1
    for size in tables.shape[1:]:
        rest *= size
    folded = tile.reshape((2, tables.shape[0], rest, -1), order="F")
    return folded[0], folded[1]


def _table(values):
    return values.reshape((values.shape[0], -1, 1), order="F")


def rope(sin, cos, src, dst):
    """dst[2i] = cos[i] src[2i] - sin[i] src[2i+1], dst[2i+1] = sin[i] src[2i] + cos[i] src[2i+1]"""
    s, c = _table(sin), _table(cos)
    even, odd = _pairs(src, sin)
    new_even, new_odd = c * even - s * odd, s * even + c * odd
    out_even, out_odd = _pairs(dst, sin)
    out_even[...] = new_even
    out_odd[...] = new_odd


def rope_backward(sin, cos, dy, dx):
    """dx += the transposed rotation of dy (the rotation's inverse)."""
    s, c = _table(sin), _table(cos)
    even, odd = _pairs(dy, sin)
    grad_even, grad_odd = c * even + s * odd, c * odd - s * even
    out_even, out_odd = _pairs(dx, sin)
    out_even += grad_even
    out_odd += grad_odd


def scale_slice(src, dst, *, alpha, axis):
    """dst = alpha * src broadcast along `axis` (dst's axis is absent from src)."""
    dst[...] = alpha * cp.expand_dims(src, axis)
