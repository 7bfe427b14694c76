"""One launch for the attention kernels that CuPy array expressions split into several:
the causal mask, and the softmax from a logsumexp and its backward.

Each is one elementwise pass over a Fortran-ordered tile, read in memory order, with
the operand that broadcasts along `axis` (a logsumexp, a row sum) read by index: in
memory order, element i of a tile has index (i / inner) % length along `axis`
(inner: the product of the dims before it), and the tile without that axis holds its
broadcast partner at i % inner + inner * (i / (inner * length)). The generic
kernels build index arrays, a mask and a temporary per operator instead. Tiles that
are not fp32/fp64, not Fortran-contiguous or of mixed dtypes go to the generic
kernels, whose numerics these follow. The causal mask's operation is the C++ that
rules_cuda_indexed.py writes from mask_causal's rule (formulas/attention.py), spelled by hand.
All three are the fallback of the rules' compiled kernels (compiled_broadcast.py,
compiled_indexed.py: the same formulas, from their text) only while those await a GPU
check; then this module goes.

Arrays only: imports CuPy, never nntile_spmd or mpi4py.
"""

import math

import cupy as cp
import numpy as np

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))

_MASK_CAUSAL = cp.ElementwiseKernel(
    "T x, int64 keys, int64 queries, int64 key_offset, int64 query_offset, T val", "T y",
    "const long long k = i % keys, q = (i / keys) % queries;"
    "y = k + key_offset > q + query_offset ? val : x;",
    "nntile_mask_causal")

_PARTNER = "i % inner + inner * (i / (inner * length))"

_SOFTMAX_FROM_LSE = cp.ElementwiseKernel(
    "T x, raw T lse, int64 inner, int64 length", "T y",
    f"y = exp(x - lse[{_PARTNER}]);",
    "nntile_softmax_from_logsumexp")

_SOFTMAX_FROM_LSE_BACKWARD = cp.ElementwiseKernel(
    "T y, T dy, raw T d, int64 inner, int64 length", "T dx",
    f"dx += y * (dy - d[{_PARTNER}]);",
    "nntile_softmax_from_logsumexp_backward")


def takes(*arrays) -> bool:
    """Do the one-launch kernels take these tiles as they are?"""
    first = arrays[0]
    return all(isinstance(a, cp.ndarray) and a.dtype == first.dtype and a.dtype in _FLOATS
               and a.flags.f_contiguous for a in arrays)


def memory_order(tile, same_as=None):
    """The tile's elements in memory order, a view (its transpose is C-contiguous);
    `same_as`: (a tile, its view), whose view is reused when `tile` is that tile, so
    that CuPy sees an in-place kernel, not an output overlapping another input."""
    if same_as is not None and tile is same_as[0]:
        return same_as[1]
    return tile.T.reshape(-1)


def broadcasts_along(full, partner, axis) -> bool:
    """Is `partner` `full` without `axis` (what the generic kernel expands)?"""
    return partner.shape == full.shape[:axis] + full.shape[axis + 1:]


def with_fallback(generic_kernels):
    """{name: kernel} of this module's kernels, each calling `generic_kernels[name]`
    where it does not take the tiles."""
    mask_causal_generic = generic_kernels["mask_causal"]
    softmax_generic = generic_kernels["softmax_from_logsumexp"]
    backward_generic = generic_kernels["softmax_from_logsumexp_backward"]

    def mask_causal(x, y, *, val, key_offset=0, query_offset=0):
        if x.ndim < 2 or x.shape != y.shape or not takes(x, y):
            return mask_causal_generic(x, y, val=val, key_offset=key_offset,
                                       query_offset=query_offset)
        flat = memory_order(x)
        _MASK_CAUSAL(flat, x.shape[0], x.shape[1], key_offset, query_offset, val,
                     memory_order(y, (x, flat)))

    def softmax_from_logsumexp(lse, x, y, *, axis):
        if x.shape != y.shape or not broadcasts_along(x, lse, axis) or not takes(lse, x, y):
            return softmax_generic(lse, x, y, axis=axis)
        _SOFTMAX_FROM_LSE(memory_order(x), memory_order(lse), math.prod(x.shape[:axis]),
                          x.shape[axis], memory_order(y))

    def softmax_from_logsumexp_backward(y, dy, d, dx, *, axis):
        if not (y.shape == dy.shape == dx.shape and broadcasts_along(y, d, axis)
                and takes(y, dy, d, dx)):
            return backward_generic(y, dy, d, dx, axis=axis)
        flat_dy = memory_order(dy)
        _SOFTMAX_FROM_LSE_BACKWARD(memory_order(y), flat_dy, memory_order(d),
                                   math.prod(y.shape[:axis]), y.shape[axis],
                                   memory_order(dx, (dy, flat_dy)))

    return {"mask_causal": mask_causal, "softmax_from_logsumexp": softmax_from_logsumexp,
            "softmax_from_logsumexp_backward": softmax_from_logsumexp_backward}
