"""CuPy entries of the seed elementwise and reduction kernels: the same bodies as the
NumPy reference (xp_math.py) with CuPy as the array module.

Arrays only: imports CuPy, never nntile_spmd or mpi4py.
"""

try:
    import cupy as cp
except ImportError as error:  # only this backend needs CuPy
    raise ImportError("kernels.cuda needs CuPy with a working CUDA install") from error

from .xp_math import table

MATH_KERNELS = table(cp)
