"""randn and dropout (generic_random.py) bound to an array module `xp`: the
elementwise ops are rules, as are the sums, extrema, extremum_count, the norms,
extremum_backward and the norms' backwards (formulas/elementwise.py, reductions.py).

Part of generic.table, so the NumPy reference and the CuPy table share these bodies.
Arrays only: never imports nntile_spmd, mpi4py, numba or cupy.
"""

import functools

from .generic_random import dropout, randn

XP_KERNELS = {kernel.__name__: kernel for kernel in (randn, dropout)}


def table(xp) -> dict:
    """These kernels with `xp` bound: entries for a backend's KERNELS table."""
    # a partial's signature drops the bound xp: the same one the numba wrappers spell out
    return {name: functools.partial(kernel, xp) for name, kernel in XP_KERNELS.items()}
