"""The cuda kernel table: the generic kernels (generic*.py) bound to CuPy, and the
elementwise rules (rules.py) compiled into CuPy ElementwiseKernels.

Arrays only: imports CuPy (>= 12, for ufunc.at), never nntile_spmd or mpi4py. Nothing
here synchronizes the stream but the embedding id and cross-entropy label checks
(generic_loss.py): scalars that live in tiles (step counters, dloss) stay on the
device and enter the expressions as 0-d arrays.
"""

try:
    import cupy as cp
    import cupyx.scipy.special
except ImportError as error:  # only this backend needs CuPy
    raise ImportError(
        "nntile_kernels.cuda needs CuPy with a working CUDA install "
        "(e.g. `pip install cupy-cuda12x`); "
        "use nntile_kernels.get_kernels('cpu') on machines without an NVIDIA GPU"
    ) from error

from . import generic
from .rules import C_TYPES, CUDA_PREAMBLE, ELEMENTWISE, cuda_source, rule_signature


class FusedRule:
    """One rule as one CuPy ElementwiseKernel per float dtype: a single pass over the
    tile where the array expressions make one per operator. Other dtypes (fp16) and
    mixed dtypes take the same rule as CuPy array expressions."""

    def __init__(self, name, rule, fallback):
        self.__name__ = self.__qualname__ = name
        self.__doc__ = repr(rule)
        self.__signature__ = rule_signature(rule)
        self.rule = rule
        self.fallback = fallback
        self.compiled = {dtype: cp.ElementwiseKernel(*cuda_source(rule, dtype),
                                                     name=f"nntile_{name}_{dtype}",
                                                     preamble=CUDA_PREAMBLE)
                         for dtype in C_TYPES}

    def __call__(self, *arrays):
        dtypes = {array.dtype.name for array in arrays}
        kernel = self.compiled.get(dtypes.pop()) if len(dtypes) == 1 else None
        if kernel is None:
            self.fallback(*arrays)
        else:
            kernel(*arrays)  # inputs, then the output, written in place


KERNELS = generic.table(cp, cupyx.scipy.special)
KERNELS.update({name: FusedRule(name, rule, KERNELS[name]) for name, rule in ELEMENTWISE.items()})
