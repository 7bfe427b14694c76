"""The elementwise rule table (nntile_kernels/rules.py): one formula, two languages.

The reference evaluates each formula with NumPy; cuda.py compiles the same text as
C++ into CuPy ElementwiseKernels. Here that C++ (cuda_source and cuda_update_source,
with CUDA_PREAMBLE) is compiled for the host by the system C++ compiler and run
against the NumPy evaluation, so a formula that means something else in C++ fails
without a GPU.
"""

import ctypes
import shutil
import subprocess

import numpy as np
import pytest
from helpers import LOOPED_RULES, RULE_PARAMS

from nntile_kernels import reference
from nntile_kernels.rules import ELEMENTWISE, UPDATES
from nntile_kernels.rules_cuda import (C_TYPES, CUDA_PREAMBLE, cuda_source, cuda_update_source,
                                       typed_literals)

CXX = shutil.which("g++") or shutil.which("c++")
TOLERANCE = {"float64": (1e-13, 1e-13), "float32": (2e-5, 2e-5)}

_HOST_PRELUDE = """
#include <cmath>
using std::erf; using std::exp; using std::fabs; using std::fmax; using std::hypot; using std::pow;
using std::sqrt; using std::tanh;
#define __device__
"""




def host_function(name, dtype):
    """A C++ loop applying the ElementwiseKernel's operation text to flat arrays."""
    rule, ctype = ELEMENTWISE[name], C_TYPES[dtype]
    _, _, operation = cuda_source(rule, dtype)
    params = ", ".join([f"const {ctype}* in_{arg}" for arg in rule.inputs]
                       + [f"double {param}_f64" for param in rule.params])
    loads = " ".join(f"const {ctype} {arg} = in_{arg}[i];" for arg in rule.inputs)
    return (f'extern "C" void {name}_{dtype}({params}, {ctype}* out, long n) {{\n'
            f"  for (long i = 0; i < n; ++i) {{\n    {loads}\n"
            f"    {ctype}& {rule.output} = out[i];\n    {operation}\n  }}\n}}\n")


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
    return (f'extern "C" void {name}_{dtype}({params}, long n) {{\n'
            f"  for (long i = 0; i < n; ++i) {{\n    {loads}\n    {operation}\n  }}\n}}\n")


@pytest.fixture(scope="module")
def host_library(tmp_path_factory):
    if CXX is None:
        pytest.skip("needs a C++ compiler (g++) to build the rules' C++ for the host")
    folder = tmp_path_factory.mktemp("rules")
    source = folder / "rules.cpp"
    source.write_text(_HOST_PRELUDE + CUDA_PREAMBLE + "".join(
        host_function(name, dtype) for name in LOOPED_RULES for dtype in C_TYPES) + "".join(
        host_update(name, dtype) for name in UPDATES for dtype in C_TYPES))
    library = folder / "rules.so"
    subprocess.run([CXX, "-O1", "-shared", "-fPIC", "-o", str(library), str(source)],
                   check=True, capture_output=True, text=True)
    return ctypes.CDLL(str(library))


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
    inputs = [x.astype(dtype)] + [rng.standard_normal(n).astype(dtype) for _ in rule.inputs[1:]]
    if rule.cases:      # the inputs a case leaves unread hold NaN: they must not leak
        inputs[1][:10] = np.nan
    function = getattr(host_library, f"{name}_{dtype}")
    # add with beta == 0 (RULE_PARAMS) and then with beta != 0: y read
    calls = [RULE_PARAMS.get(name, {})] + ([dict(alpha=0.5, beta=-2.0)] if rule.cases else [])
    for params in calls:
        start = rng.standard_normal(n).astype(dtype) if rule.accumulate else np.zeros(n, dtype)
        got, expected = start.copy(), start.copy()
        function(*[a.ctypes.data_as(_pointer(dtype)) for a in inputs],
                 *[ctypes.c_double(params[p]) for p in rule.params],
                 got.ctypes.data_as(_pointer(dtype)), ctypes.c_long(n))
        reference.KERNELS[name](*inputs, expected, **params)
        rtol, atol = TOLERANCE[dtype]
        np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol, err_msg=f"{name} {params}")


@pytest.mark.parametrize("dtype", sorted(C_TYPES))
@pytest.mark.parametrize("name", sorted(UPDATES))
def test_cpp_of_each_update_matches_its_numpy_evaluation(host_library, name, dtype):
    """Steps 1 (the moments hold NaN: not read) and 7, with weight decay."""
    update = UPDATES[name]
    rng = np.random.default_rng(5)
    n = 1000
    params = dict(lr=0.01, beta1=0.8, beta2=0.99, eps=1e-6, weight_decay=0.1)
    for step in (1, 7):
        grad, param = (rng.standard_normal(n).astype(dtype) for _ in range(2))
        moments = ([np.full(n, np.nan, dtype)] * 2 if step == 1 else
                   [rng.standard_normal(n).astype(dtype), rng.uniform(0.1, 1.0, n).astype(dtype)])
        got = [param.copy(), *(m.copy() for m in moments)]
        expected = [param.copy(), *(m.copy() for m in moments)]
        getattr(host_library, f"{name}_{dtype}")(
            grad.ctypes.data_as(_pointer(dtype)), ctypes.c_longlong(step),
            *[ctypes.c_double(params[p]) for p in update.params],
            *[a.ctypes.data_as(_pointer(dtype)) for a in got], ctypes.c_long(n))
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
