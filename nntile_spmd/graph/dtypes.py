"""Graph layer: the dtype names of the graph and their storage facts.

Imports nothing beyond the standard library, NumPy and ml_dtypes (NumPy's bfloat16,
the one the JAX ecosystem uses); no numba, cupy, mpi4py.
"""

import ml_dtypes
import numpy as np

# Every graph dtype with the NumPy dtype its tiles are stored in. The fast fp32
# variants change only how gemm computes (docs/precision.md), so their tiles are plain
# float32; bf16 tiles are ml_dtypes.bfloat16, two bytes per element like fp16.
STORAGE_DTYPES = {
    "fp32": np.dtype(np.float32),
    "fp32_fast_tf32": np.dtype(np.float32),
    "fp32_fast_fp16": np.dtype(np.float32),
    "fp32_fast_bf16": np.dtype(np.float32),
    "fp64": np.dtype(np.float64),
    "fp16": np.dtype(np.float16),
    "bf16": np.dtype(ml_dtypes.bfloat16),
    "int64": np.dtype(np.int64),
    "int32": np.dtype(np.int32),
    "bool": np.dtype(np.bool_),
}

ITEMSIZE = {name: dtype.itemsize for name, dtype in STORAGE_DTYPES.items()}

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


def storage_dtype(dtype: str) -> np.dtype:
    """NumPy dtype that holds tiles of graph dtype `dtype`."""
    return STORAGE_DTYPES[check_dtype(dtype)]
