"""Pure array kernels (NumPy reference, numba CPU, CuPy CUDA) behind one calling convention.

This layer knows only arrays: it must not import nntile_spmd or mpi4py, and importing
the package itself loads no backend (no numpy, numba or cupy until get_kernels).

Most kernels are formulas written once (formulas/, one module per op family, named as
the graph's families), in the rule language of rules.py and the rules_*.py kinds; the
tables evaluate them (generic.py), compile them (cuda.py) or run the numba loops
generated from them (cpu_rules*.py, by generate.py).
"""

import importlib

# Every backend's KERNELS table has exactly these keys (tests/kernels checks it).
KERNEL_NAMES = (
    "adam_step",
    "adamw_step",
    "add",
    "add_fiber",
    "add_scalar",
    "add_slice",
    "cast",
    "clear",
    "copy",
    "cross_entropy",
    "cross_entropy_backward",
    "cross_entropy_lse",
    "cross_entropy_lse_backward",
    "embedding",
    "embedding_backward",
    "fill",
    "gelu",
    "gelu_backward",
    "gelutanh",
    "gelutanh_backward",
    "gemm",
    "logsumexp",
    "logsumexp_backward",
    "logsumexp_merge",
    "mask_causal",
    "mask_scalar",
    "maxsumexp",
    "mse",
    "mse_backward",
    "multiply",
    "multiply_fiber",
    "multiply_slice",
    "permute",
    "pow",
    "pow_backward",
    "relu",
    "relu_backward",
    "rope",
    "rope_backward",
    "scale",
    "scale_slice",
    "sgd_step",
    "silu",
    "silu_backward",
    "softmax",
    "softmax_backward",
    "softmax_from_logsumexp",
    "softmax_from_logsumexp_backward",
    "sqrt",
    "sqrt_backward",
    "sum",
    "sum_fiber",
    "sum_slice",
    "sumprod_fiber",
    "sumprod_fiber_backward",
    "sumprod_slice",
    "sumprod_slice_backward",
    "transpose",
    "valid_count",
)
# seed elementwise and reduction kernels (rules of formulas/elementwise.py and
# reductions.py; randn and dropout generic_random.py's)
MATH_KERNEL_NAMES = (
    "div", "extremum_backward", "extremum_count", "hypot", "hypot_backward",
    "dropout", "hypot_scalar_inverse", "max_slice", "maximum", "min_slice", "minimum", "norm_fiber",
    "norm_fiber_backward", "norm_slice", "norm_slice_backward", "randn", "scale_fiber",
    "sigmoid", "sigmoid_backward", "sub", "sum_backward", "tanh", "tanh_backward",
)
# data movement between tilings: slice, gather, scatter, concat, reshape (generic_data.py)
# (reshaped_call runs another kernel of its table on tiles the plan aliases as views)
DATA_KERNEL_NAMES = ("add_box", "reshape_box", "reshaped_call")
# convolutions and copy_intersection (generic_conv.py, cpu_conv.py)
CONV_KERNEL_NAMES = ("conv2d_inplace", "conv2d_bwd_input_inplace", "conv2d_bwd_weight_inplace",
                     "copy_intersection")
KERNEL_NAMES = tuple(sorted(KERNEL_NAMES + MATH_KERNEL_NAMES + DATA_KERNEL_NAMES +
                            CONV_KERNEL_NAMES))

BACKENDS = ("reference", "cpu", "cuda")


def get_kernels(backend: str) -> dict:
    """The KERNELS table of `backend` ("reference", "cpu" or "cuda"), imported on first use."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown kernel backend {backend!r}; expected one of {BACKENDS}")
    return importlib.import_module(f"{__name__}.{backend}").KERNELS
