"""NumPy entries of the seed elementwise and reduction kernels (bodies in xp_math.py).

Arrays only: imports NumPy, never nntile_spmd, mpi4py, numba or cupy.
"""

import numpy as np

from .xp_math import table

MATH_KERNELS = table(np)
