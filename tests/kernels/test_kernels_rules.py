"""The elementwise rules (nntile_kernels/formulas/'s ELEMENTWISE): one formula, two languages.

The reference evaluates each formula with NumPy; cuda.py compiles the same text as
C++ into CuPy ElementwiseKernels. Here that C++ (cuda_source and cuda_update_source,
with CUDA_PREAMBLE) is compiled for the host by the system C++ compiler and run
against the NumPy evaluation, so a formula that means something else in C++ fails
without a GPU.
"""

import ctypes

import numpy as np
import pytest
from helpers import BETA_CASE_PARAMS, LOOPED_RULES, OTHER_CASE_PARAMS, RULE_PARAMS, UPDATE_PARAMS
from host_cpp import host_library as compile_host_library
from host_rules import host_loop

from nntile_kernels import reference
from nntile_kernels.formulas import ELEMENTWISE, UPDATES
from nntile_kernels.rules import names_in
from nntile_kernels.rules_cuda import (C_TYPES, CUDA_PREAMBLE, cuda_source, cuda_update_source,
                                       typed_literals)

TOLERANCE = {"float64": (1e-13, 1e-13), "float32": (2e-5, 2e-5)}





def host_function(name, dtype):
    """A C++ loop applying the ElementwiseKernel's operation text to flat arrays."""
    rule, ctype = ELEMENTWISE[name], C_TYPES[dtype]
    _, _, operation = cuda_source(rule, dtype)
    params = ", ".join([f"const {ctype}* in_{arg}" for arg in rule.inputs]
                       + [f"double {param}_f64" for param in rule.params])
    loads = " ".join(f"const {ctype} {arg} = in_{arg}[i];" for arg in rule.inputs)
    return host_loop(name, dtype, f"{params}, {ctype}* out",
                     f"{loads} {ctype}& {rule.output} = out[i];", operation)


def host_update(name, dtype):
    """The same for an update: the counter and params by value, the state in place."""
    update, ctype = UPDATES[name], C_TYPES[dtype]
    _, _, operation = cuda_update_source(update, dtype)
    params = ", ".join([f"const {ctype}* in_{arg}" for arg in update.inputs]
                       + [f"long long {update.counter}_i64"]
                       + [f"double {param}_f64" for param in update.params]
                       + [f"{ctype}* state_{tile}" for tile in update.state])
    loads = " ".join([f"const {ctype} {arg} = in_{arg}[i];" for arg in update.inputs]
                     + [f"{ctype}& {tile} = state_{tile}[i];" for tile in update.state])
    return host_loop(name, dtype, params, loads, operation)


@pytest.fixture(scope="module")
def host_library(tmp_path_factory):
    return compile_host_library(tmp_path_factory.mktemp("rules"), CUDA_PREAMBLE + "".join(
        host_function(name, dtype) for name in LOOPED_RULES for dtype in C_TYPES) + "".join(
        host_update(name, dtype) for name in UPDATES for dtype in C_TYPES))


def _pointer(dtype):
    return ctypes.POINTER(ctypes.c_double if dtype == "float64" else ctypes.c_float)


@pytest.mark.parametrize("dtype", sorted(C_TYPES))
@pytest.mark.parametrize("name", LOOPED_RULES)
def test_cpp_of_each_rule_matches_its_numpy_evaluation(host_library, name, dtype):
    rule = ELEMENTWISE[name]
    rng = np.random.default_rng(3)
    n = 1000
    x = rng.uniform(0.5, 2.0, n) if name.startswith("sqrt") else rng.standard_normal(n)
    x[:3] = [0.0, -0.0, 1e-8] if not name.startswith("sqrt") else x[:3]
    inputs = ([x.astype(dtype)] + [rng.standard_normal(n).astype(dtype)
                                   for _ in rule.inputs[1:]])[:len(rule.inputs)]
    for index, arg in enumerate(rule.inputs):   # the inputs a case leaves unread hold NaN:
        if any(arg not in names_in(value) for _, value in rule.cases):   # they must not leak
            inputs[index][:10] = np.nan
    function = getattr(host_library, f"{name}_{dtype}")
    # add with beta == 0 (RULE_PARAMS) and then with beta != 0: y read; pow with exp 3, 2
    other = OTHER_CASE_PARAMS.get(name, BETA_CASE_PARAMS)
    calls = [RULE_PARAMS.get(name, {})] + ([other] if rule.cases else [])
    for params in calls:
        start = rng.standard_normal(n).astype(dtype) if rule.accumulate else np.zeros(n, dtype)
        got, expected = start.copy(), start.copy()
        function(*[a.ctypes.data_as(_pointer(dtype)) for a in inputs],
                 *[ctypes.c_double(params[p]) for p in rule.params],
                 got.ctypes.data_as(_pointer(dtype)), ctypes.c_longlong(n))
        reference.KERNELS[name](*inputs, expected, **params)
        rtol, atol = TOLERANCE[dtype]
        np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol, err_msg=f"{name} {params}")


@pytest.mark.parametrize("dtype", sorted(C_TYPES))
@pytest.mark.parametrize("name", sorted(UPDATES))
def test_cpp_of_each_update_matches_its_numpy_evaluation(host_library, name, dtype):
    """Steps 1 (the moments and the velocity hold NaN: not read) and 7, with weight
    decay; SGD also without momentum (the velocity neither read nor written)."""
    update = UPDATES[name]
    rng = np.random.default_rng(5)
    n = 1000
    for params, step in ((params, step) for params in UPDATE_PARAMS[name] for step in (1, 7)):
        given = {**dict(update.defaults), **params}
        grad, param = (rng.standard_normal(n).astype(dtype) for _ in range(2))
        moments = ([np.full(n, np.nan, dtype)] * 2 if step == 1 else
                   [rng.standard_normal(n).astype(dtype), rng.uniform(0.1, 1.0, n).astype(dtype)])
        moments = moments[:len(update.state) - 1]
        got = [param.copy(), *(m.copy() for m in moments)]
        expected = [param.copy(), *(m.copy() for m in moments)]
        getattr(host_library, f"{name}_{dtype}")(
            grad.ctypes.data_as(_pointer(dtype)), ctypes.c_longlong(step),
            *[ctypes.c_double(given[p]) for p in update.params],
            *[a.ctypes.data_as(_pointer(dtype)) for a in got], ctypes.c_longlong(n))
        reference.KERNELS[name](np.array(step), grad, *expected, **params)
        rtol, atol = TOLERANCE[dtype]
        for tile, a, b in zip(update.state, got, expected):
            np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=f"{name} {tile} {step}")


def test_float_kernels_get_float_literals():
    """1.0 becomes 1.0f in float kernels (a double literal would widen the math), never
    inside a name or a longer number; double kernels keep the text."""
    text = "0.5 * x1 * (1.0 + RSQRT2) + 3.0e-5 - 2"
    assert typed_literals(text, "float") == "0.5f * x1 * (1.0f + RSQRT2) + 3.0e-5f - 2"
    assert typed_literals(text, "double") == text


def test_cuda_source_names_the_dtype_and_accumulates():
    params, out, operation = cuda_source(ELEMENTWISE["gelu_backward"], "float32")
    assert (params, out) == ("float32 x, float32 dy", "float32 dx")
    assert operation.splitlines()[-1].startswith("dx += ")
    assert "const float RSQRT2 = 0.7071067811865475f;" in operation
