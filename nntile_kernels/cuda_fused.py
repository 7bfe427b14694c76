"""One kernel launch for work that CuPy array expressions split into several.

On a GPU every operator of an array expression is a kernel launch and a temporary tile;
the host's cost of those launches, not the device's, bounds a training step made of
thousands of small tasks. Here: the output store that most generic kernels end with
(out = alpha*value + beta*previous), the SGD, Adam and AdamW updates (compiled from
their rules, formulas.UPDATES), and zeroing a tile (a memset: clear's rule). Each takes what it
can (fp32 and fp64 CuPy arrays) and leaves the rest to the generic kernels, whose
numerics these follow (docs/precision.md), and sees Fortran-ordered tiles as their
C-ordered transposes (layout.c_order_views).

Arrays only: imports CuPy, never nntile_spmd or mpi4py.
"""

import cupy as cp
import cupyx.scipy.special
import numpy as np

from .compiled_rules import AWAITING_GPU_CHECK, CompiledUpdate
from .layout import c_order_views
from .formulas import UPDATES
from .rules import ArrayUpdate, rule_namespace
from .rules_cuda import CUDA_PREAMBLE, cuda_update_source

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))

# `previous` is loaded but not used when beta == 0: it may hold garbage (NaN)
_STORE = cp.ElementwiseKernel(
    "V value, P previous, float64 alpha, float64 beta", "T out",
    "out = beta == 0.0 ? (T)(alpha * value) : (T)(alpha * value + beta * previous)",
    "nntile_store")


def store(out, value, beta, previous, alpha) -> bool:
    """out = alpha*value + beta*previous in one pass over out (value broadcasts);
    False where the operands are not all fp32/fp64 CuPy arrays."""
    if not (isinstance(value, cp.ndarray) and isinstance(previous, cp.ndarray)
            and out.dtype in _FLOATS and value.dtype in _FLOATS
            and previous.dtype in _FLOATS):
        return False
    value, previous, out = c_order_views((value, previous, out))
    _STORE(value, previous, float(alpha), float(beta), out)
    return True


def _update_compiler(name):
    return lambda update, dtype: cp.ElementwiseKernel(*cuda_update_source(update, dtype),
                                                      name=f"nntile_{name}_{dtype}",
                                                      preamble=CUDA_PREAMBLE)


# PyTorch's SGD, Adam and AdamW in one launch each (formulas.UPDATES): the first step and
# the bias corrections come from the step counter that lives on the device; other
# dtypes take the array expressions
_NAMESPACE = rule_namespace(cp, cupyx.scipy.special)
sgd_step, adam_step, adamw_step = (
    CompiledUpdate(name, UPDATES[name], ArrayUpdate(name, UPDATES[name], _NAMESPACE),
                   _update_compiler(name), dispatch=name not in AWAITING_GPU_CHECK)
    for name in ("sgd_step", "adam_step", "adamw_step"))


def clear(x):
    """x[...] = 0: a memset where the tile is one block (CuPy's fill takes that path for
    C-ordered arrays only; tiles are Fortran-ordered)."""
    if x.size == 0:
        return
    if x.flags.f_contiguous or x.flags.c_contiguous:
        x.data.memset_async(0, x.nbytes)
    else:
        x.fill(0)
