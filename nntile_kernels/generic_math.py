"""The norm's backward along an axis, randn and dropout (the elementwise ops are
rules.py's; the sums, max_slice, min_slice, extremum_count and the norms
rules_reduce.py's; extremum_backward rules_broadcast.py's) written once against an
array module `xp`.

Part of generic.table, so the NumPy reference and the CuPy table share these bodies:
every line is an xp ufunc or reduction both modules spell alike. Arrays only: never imports
nntile_spmd, mpi4py, numba or cupy. Calling convention of nntile_kernels.reference, with `xp`
bound first by table(xp). Reductions fold a tile F-order to (m, k, n), k the reduced
axis, so any axis reduces with one xp call and no copy.
"""

import functools

from .generic_random import dropout, randn


def _fold(x, axis):
    """(m, k, n) F-order view of x around `axis`."""
    m = n = 1
    for size in x.shape[:axis]:
        m *= size
    for size in x.shape[axis + 1:]:
        n *= size
    return x.reshape((m, x.shape[axis], n), order="F")


def _slice(y, x, axis):
    """(m, 1, n) view of a slice of x (x's shape without `axis`), broadcast along k."""
    m, _, n = _fold(x, axis).shape
    return y.reshape((m, 1, n), order="F")


# ---------------------------------------------------------------- elementwise


# sub, div, tanh, sigmoid, hypot, maximum, minimum and their backwards are rules
# (rules.py), not functions here.


# ---------------------------------------------------------------- reductions


def norm_slice_backward(xp, x, y, dy, dx, *, axis, alpha=1.0):
    """dx += alpha^2 * x / y * dy, y and dy broadcast along `axis` (y = |alpha| * norm of x);
    0 where y == 0 (then x == 0 along the whole fiber)."""
    norm, grad = _slice(y, x, axis), _slice(dy, x, axis)
    scale = xp.where(norm == 0, 0, (alpha * alpha) * grad / xp.where(norm == 0, 1, norm))
    folded = _fold(dx, axis)
    folded += scale * _fold(x, axis)


XP_KERNELS = {kernel.__name__: kernel for kernel in (
    norm_slice_backward, randn, dropout)}


def table(xp) -> dict:
    """These kernels with `xp` bound: entries for a backend's KERNELS table."""
    # a partial's signature drops the bound xp: the same one the numba wrappers spell out
    return {name: functools.partial(kernel, xp) for name, kernel in XP_KERNELS.items()}
