"""Graph layer: the dtype names of the graph and their storage facts.

Imports nothing beyond the standard library and NumPy; ml_dtypes (NumPy's bfloat16, the
one the JAX ecosystem uses) only when a bf16 tile is first made: importing it takes
longer than the rest of `import nntile_spmd` together. No numba, cupy, mpi4py.
"""

import functools
import importlib

import numpy as np

# Every graph dtype with the NumPy dtype its tiles are stored in, as (module, name). The
# fast fp32 variants change only how gemm computes (docs/precision.md), so their tiles
# are plain float32; bf16 tiles are ml_dtypes.bfloat16, two bytes per element like fp16.
STORAGE_DTYPES = {
    "fp32": ("numpy", "float32"),
    "fp32_fast_tf32": ("numpy", "float32"),
    "fp32_fast_fp16": ("numpy", "float32"),
    "fp32_fast_bf16": ("numpy", "float32"),
    "fp64": ("numpy", "float64"),
    "fp16": ("numpy", "float16"),
    "bf16": ("ml_dtypes", "bfloat16"),
    "int64": ("numpy", "int64"),
    "int32": ("numpy", "int32"),
    "bool": ("numpy", "bool_"),
}

# Bytes per element, known without loading the module that stores a dtype
# (tests/graph/test_dtypes.py checks it against storage_dtype).
ITEMSIZE = {"fp32": 4, "fp32_fast_tf32": 4, "fp32_fast_fp16": 4, "fp32_fast_bf16": 4,
            "fp64": 8, "fp16": 2, "bf16": 2, "int64": 8, "int32": 4, "bool": 1}

FLOAT_DTYPES = frozenset(
    {"fp32", "fp32_fast_tf32", "fp32_fast_fp16", "fp32_fast_bf16", "fp64", "fp16", "bf16"}
)
INT_DTYPES = frozenset({"int64", "int32"})
# Stored in 16 bits; CPU kernels compute on them in fp32 (nntile_kernels/widen.py).
HALF_DTYPES = frozenset({"fp16", "bf16"})
# fp32 tensors whose gemm may round its inputs to a shorter mantissa (NNTile's names):
# the reduced type each one's gemm computes with, accumulating in fp32.
FAST_FP32_COMPUTE = {"fp32_fast_tf32": "tf32", "fp32_fast_fp16": "fp16",
                     "fp32_fast_bf16": "bf16"}
ALL_DTYPES = tuple(STORAGE_DTYPES)


def check_dtype(dtype: str) -> str:
    """Return `dtype` if it is a graph dtype name, else raise a TypeError listing them."""
    if dtype not in STORAGE_DTYPES:
        raise TypeError(f"unknown dtype {dtype!r}; expected one of {', '.join(ALL_DTYPES)}")
    return dtype


@functools.cache
def storage_dtype(dtype: str) -> np.dtype:
    """NumPy dtype that holds tiles of graph dtype `dtype` (imports its module, once)."""
    module, name = STORAGE_DTYPES[check_dtype(dtype)]
    return np.dtype(getattr(importlib.import_module(module), name))
