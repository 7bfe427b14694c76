"""Graph layer: the dtype names of the graph and their storage facts.

Imports nothing beyond the standard library and NumPy (no numba, cupy, mpi4py).
"""

import numpy as np

# Every graph dtype with the NumPy dtype its tiles are stored in. The fast fp32
# variants change only how a GPU may compute, so their tiles are plain float32.
# bf16 has no NumPy dtype: it is a valid graph dtype, but no CPU tile can hold it.
STORAGE_DTYPES = {
    "fp32": np.dtype(np.float32),
    "fp32_fast_tf32": np.dtype(np.float32),
    "fp32_fast_fp16": np.dtype(np.float32),
    "fp32_fast_bf16": np.dtype(np.float32),
    "fp64": np.dtype(np.float64),
    "fp16": np.dtype(np.float16),
    "bf16": None,
    "int64": np.dtype(np.int64),
    "int32": np.dtype(np.int32),
    "bool": np.dtype(np.bool_),
}

ITEMSIZE = {"bf16": 2} | {
    name: dtype.itemsize for name, dtype in STORAGE_DTYPES.items() if dtype is not None
}

FLOAT_DTYPES = frozenset(
    {"fp32", "fp32_fast_tf32", "fp32_fast_fp16", "fp32_fast_bf16", "fp64", "fp16", "bf16"}
)
INT_DTYPES = frozenset({"int64", "int32"})
ALL_DTYPES = tuple(STORAGE_DTYPES)


def check_dtype(dtype: str) -> str:
    """Return `dtype` if it is a graph dtype name, else raise a TypeError listing them."""
    if dtype not in STORAGE_DTYPES:
        raise TypeError(f"unknown dtype {dtype!r}; expected one of {', '.join(ALL_DTYPES)}")
    return dtype


def storage_dtype(dtype: str) -> np.dtype:
    """NumPy dtype that holds tiles of graph dtype `dtype`."""
    numpy_dtype = STORAGE_DTYPES[check_dtype(dtype)]
    if numpy_dtype is None:
        raise TypeError(f"dtype {dtype!r} has no NumPy storage; CPU tiles cannot hold it")
    return numpy_dtype
