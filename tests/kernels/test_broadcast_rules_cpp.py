"""The broadcast rules' C++ (nntile_kernels/rules_cuda_broadcast.py), compiled for the host
by the system C++ compiler and run over tiles in memory order, against the NumPy
evaluation of the same formulas: the text and the partner index arithmetic a GPU
session would dispatch, checked without a GPU."""

import ctypes

import numpy as np
import pytest
from host_cpp import host_library as compile_host_library

from nntile_kernels import reference
from nntile_kernels.layout import fiber_folds
from nntile_kernels.formulas import BROADCAST
from nntile_kernels.rules import names_in
from nntile_kernels.rules_cuda import C_TYPES, CUDA_PREAMBLE
from nntile_kernels.rules_cuda_broadcast import INDEX_SIZES, cuda_broadcast_source

TOLERANCE = {"float64": 1e-13, "float32": 2e-5}
PARAMS = {"add_slice": {"alpha": -1.5, "beta": 0.5}, "multiply_slice": {"alpha": 0.5},
          "sumprod_slice_backward": {"alpha": 2.0}, "scale_fiber": {"alpha": -3.0},
          "norm_fiber_backward": {"alpha": 1.5}, "add_fiber": {"alpha": 0.5, "beta": -2.0},
          "multiply_fiber": {"alpha": -0.5}, "sumprod_fiber_backward": {"alpha": 3.0},
          "scale_slice": {"alpha": -2.0}, "sum_backward": {"alpha": 0.5},
          "norm_slice_backward": {"alpha": -0.5}, "mse_backward": {"alpha": 1.5}}


def host_function(name, dtype):
    """A C++ loop over the flat elements applying the kernel's operation text."""
    broadcast, ctype = BROADCAST[name], C_TYPES[dtype]
    rule = broadcast.rule
    _, _, operation = cuda_broadcast_source(broadcast, dtype)
    params = ", ".join([f"const {ctype}* {arg}_partner" if arg in broadcast.partners
                        else f"const {ctype}* in_{arg}" for arg in rule.inputs]
                       + [f"long long {size}" for size in INDEX_SIZES[broadcast.shape]]
                       + [f"double {param}_f64" for param in rule.params])
    loads = " ".join(f"const {ctype} {arg} = in_{arg}[i];" for arg in rule.inputs
                     if arg not in broadcast.partners)
    return (f'extern "C" void {name}_{dtype}({params}, {ctype}* out, long long n) {{\n'
            f"  for (long long i = 0; i < n; ++i) {{\n    {loads}\n"
            f"    {ctype}& {rule.output} = out[i];\n    {operation}\n  }}\n}}\n")


@pytest.fixture(scope="module")
def host_library(tmp_path_factory):
    return compile_host_library(tmp_path_factory.mktemp("broadcast_rules"), CUDA_PREAMBLE + "".join(
        host_function(name, dtype) for name in BROADCAST for dtype in C_TYPES))


def _pointer(array):
    kind = ctypes.c_double if array.dtype == np.float64 else ctypes.c_float
    return array.ctypes.data_as(ctypes.POINTER(kind))


@pytest.mark.parametrize("dtype", sorted(C_TYPES))
@pytest.mark.parametrize("axis", [0, 1, 2])
@pytest.mark.parametrize("name", sorted(BROADCAST))
def test_cpp_of_each_broadcast_rule_matches_its_numpy_evaluation(host_library, name, axis,
                                                                   dtype):
    """A 4 x 5 x 3 x 2 tile, the last dim a fiber's batch dim; the partners' and the
    output's unread contents NaN."""
    broadcast, rng = BROADCAST[name], np.random.default_rng(axis)
    shape, batch_ndim = (4, 5, 3, 2), (1 if broadcast.shape == "fiber" else 0)
    m, n, k, _ = fiber_folds(shape, axis, batch_ndim)
    part = {"slice": shape[:axis] + shape[axis + 1:], "scalar": (),
            "fiber": (shape[axis], *shape[len(shape) - batch_ndim:])}[broadcast.shape]
    names = (*broadcast.rule.inputs, broadcast.rule.output)
    arrays = {a: np.asfortranarray(rng.standard_normal(part if a in broadcast.partners
                                                       else shape).astype(dtype))
              for a in names}
    if name.startswith("norm_"):   # a norm is >= 0, and 0 where x is
        arrays["y"] = np.abs(arrays["y"])
        arrays["y"][0] = 0.0
    if not broadcast.rule.accumulate:
        arrays[broadcast.rule.output][...] = np.nan
    keywords = ({} if broadcast.shape == "scalar" else
                dict(axis=axis, **({"batch_ndim": batch_ndim} if broadcast.shape == "fiber"
                                   else {})))
    # then beta == 0 (add_slice's, add_fiber's case): the input it leaves unread NaN
    calls = [(PARAMS.get(name, {}), ())]
    for _, value in broadcast.rule.cases:
        calls.append((dict(PARAMS[name], beta=0.0),
                      [a for a in broadcast.rule.inputs if a not in names_in(value)]))
    for params, unread in calls:
        inputs = {a: array.copy(order="F") for a, array in arrays.items()}
        for array in unread:
            inputs[array][...] = np.nan
        got, expected = inputs[names[-1]].copy(order="F"), inputs[names[-1]].copy(order="F")
        sizes = {"inner": m, "length": n, "outer": k}
        getattr(host_library, f"{name}_{dtype}")(
            *[_pointer(inputs[a]) for a in broadcast.rule.inputs],
            *[ctypes.c_longlong(sizes[s]) for s in INDEX_SIZES[broadcast.shape]],
            *[ctypes.c_double(params[p]) for p in broadcast.rule.params],
            _pointer(got), ctypes.c_longlong(got.size))
        reference.KERNELS[name](*[inputs[a] for a in broadcast.rule.inputs], expected,
                                **keywords, **params)
        assert not np.isnan(expected).any()
        tolerance = TOLERANCE[dtype]
        np.testing.assert_allclose(got, expected, rtol=tolerance, atol=tolerance,
                                   err_msg=f"{name} axis {axis} {params}")
