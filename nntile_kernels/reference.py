"""NumPy reference kernels: the living specification the cpu and cuda tables must match.

Arrays only: imports NumPy and SciPy, never nntile_spmd, mpi4py, numba or cupy. The
kernels themselves are written once against an array module (generic*.py, and the
formulas in formulas/); this table binds them to NumPy, as cuda.py binds
them to CuPy. Calling convention: ``KERNELS[name](*inputs, *outputs, **params)``
writes the outputs in place and returns None; an output may be the same object as an
input; with ``beta == 0`` an output's previous contents are never read.
"""

import numpy as np
import scipy.special

from . import generic

KERNELS = generic.table(np, scipy.special)


def __getattr__(name):
    """`reference.gelu` is `reference.KERNELS["gelu"]` (module attributes, PEP 562)."""
    try:
        return KERNELS[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
