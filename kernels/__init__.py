"""Pure array kernels (NumPy reference, numba CPU, CuPy CUDA) behind one calling convention.

This layer knows only arrays: it must not import nntile_spmd or mpi4py, and importing
the package itself loads no backend (no numpy, numba or cupy until get_kernels).
"""

import importlib

# Every backend's KERNELS table has exactly these keys (tests/kernels checks it).
KERNEL_NAMES = (
    "adam_step",
    "adamw_step",
    "add",
    "add_fiber",
    "add_scalar",
    "cast",
    "clear",
    "copy",
    "cross_entropy",
    "cross_entropy_backward",
    "embedding",
    "embedding_backward",
    "fill",
    "gelu",
    "gelu_backward",
    "gelutanh",
    "gelutanh_backward",
    "gemm",
    "logsumexp",
    "maxsumexp",
    "mse",
    "mse_backward",
    "multiply",
    "relu",
    "relu_backward",
    "scale",
    "sgd_step",
    "silu",
    "silu_backward",
    "softmax",
    "softmax_backward",
    "sqrt",
    "sqrt_backward",
    "sum",
    "sum_fiber",
    "transpose",
)

BACKENDS = ("reference", "cpu", "cuda")


def get_kernels(backend: str) -> dict:
    """The KERNELS table of `backend` ("reference", "cpu" or "cuda"), imported on first use."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown kernel backend {backend!r}; expected one of {BACKENDS}")
    return importlib.import_module(f"{__name__}.{backend}").KERNELS
