"""Numba kernels of the masks of the cpu table (mask_scalar, mask_causal). The slice
sums (sum_slice, sumprod_slice) are rules of rules_reduce.py, their loops generated into
cpu_rules_reduce.py; the slice ops that broadcast a slice back (add_slice,
multiply_slice, sumprod_slice_backward, logsumexp_backward, the softmax from a
logsumexp and its backward) are formulas of rules_broadcast.py, their loops generated
into cpu_rules_broadcast.py.

Arrays only: never imports nntile_spmd, mpi4py or cupy. fp16 falls back to the NumPy
reference.
"""

import numpy as np
from numba import njit

from . import reference
from .cpu_common import F16


@njit(cache=True, nogil=True)
def _mask_scalar(mask, x, y, val):
    # flat F-order views: the mask's dims lead, so x's element b*size + i has mask[i]
    size = mask.size
    value = y.dtype.type(val)
    for b in range(y.size // size):
        for i in range(size):
            y[b * size + i] = x[b * size + i] if mask[i] else value


@njit(cache=True, nogil=True)
def _mask_causal(x, y, val, key_offset, query_offset, in_place):
    # [keys, queries, batch] F-order views: in each column the masked keys are a tail run
    keys, queries, batch = y.shape
    value = y.dtype.type(val)
    for b in range(batch):
        for j in range(queries):
            first = min(max(0, query_offset + j - key_offset + 1), keys)
            if not in_place:
                for i in range(first):
                    y[i, j, b] = x[i, j, b]
            for i in range(first, keys):
                y[i, j, b] = value


def mask_causal(x, y, *, val, key_offset=0, query_offset=0):
    """y = val where key index (dim 0) > query index (dim 1), else x (y may be x)."""
    if x.dtype is F16 or not (x.flags.f_contiguous and y.flags.f_contiguous):
        return reference.mask_causal(x, y, val=val, key_offset=key_offset,
                                     query_offset=query_offset)
    shape = x.shape[:2] + (-1,)
    _mask_causal(x.reshape(shape, order="F"), y.reshape(shape, order="F"), float(val),
                 int(key_offset), int(query_offset), np.may_share_memory(x, y))


def mask_scalar(mask, x, y, *, val, batch_ndim=0):
    """y = x where mask, else val; mask has x's leading dims, broadcast over the batch dims."""
    if x.dtype is F16:
        return reference.mask_scalar(mask, x, y, val=val, batch_ndim=batch_ndim)
    _mask_scalar(mask.ravel("K"), x.ravel("K"), y.ravel("K"), float(val))
