"""The elementwise rule table (nntile_kernels/rules.py): one formula, two languages.

The reference evaluates each formula with NumPy; cuda.py compiles the same text as
C++ into CuPy ElementwiseKernels. Here that C++ (cuda_source, with CUDA_PREAMBLE) is
compiled for the host by the system C++ compiler and run against the NumPy
evaluation, so a formula that means something else in C++ fails without a GPU.
"""

import ctypes
import shutil
import subprocess

import numpy as np
import pytest

from nntile_kernels import reference
from nntile_kernels.rules import C_TYPES, CUDA_PREAMBLE, ELEMENTWISE, _typed_literals, cuda_source

CXX = shutil.which("g++") or shutil.which("c++")
TOLERANCE = {"float64": (1e-13, 1e-13), "float32": (2e-5, 2e-5)}

_HOST_PRELUDE = """
#include <cmath>
using std::erf; using std::exp; using std::fmax; using std::sqrt; using std::tanh;
#define __device__
"""


def host_function(name, dtype):
    """A C++ loop applying the ElementwiseKernel's operation text to flat arrays."""
    rule, ctype = ELEMENTWISE[name], C_TYPES[dtype]
    _, _, operation = cuda_source(rule, dtype)
    params = ", ".join(f"const {ctype}* in_{arg}" for arg in rule.inputs)
    loads = " ".join(f"const {ctype} {arg} = in_{arg}[i];" for arg in rule.inputs)
    return (f'extern "C" void {name}_{dtype}({params}, {ctype}* out, long n) {{\n'
            f"  for (long i = 0; i < n; ++i) {{\n    {loads}\n"
            f"    {ctype}& {rule.output} = out[i];\n    {operation}\n  }}\n}}\n")


@pytest.fixture(scope="module")
def host_library(tmp_path_factory):
    if CXX is None:
        pytest.skip("needs a C++ compiler (g++) to build the rules' C++ for the host")
    folder = tmp_path_factory.mktemp("rules")
    source = folder / "rules.cpp"
    source.write_text(_HOST_PRELUDE + CUDA_PREAMBLE + "".join(
        host_function(name, dtype) for name in ELEMENTWISE for dtype in C_TYPES))
    library = folder / "rules.so"
    subprocess.run([CXX, "-O1", "-shared", "-fPIC", "-o", str(library), str(source)],
                   check=True, capture_output=True, text=True)
    return ctypes.CDLL(str(library))


@pytest.mark.parametrize("dtype", sorted(C_TYPES))
@pytest.mark.parametrize("name", sorted(ELEMENTWISE))
def test_cpp_of_each_rule_matches_its_numpy_evaluation(host_library, name, dtype):
    rule = ELEMENTWISE[name]
    rng = np.random.default_rng(3)
    n = 1000
    x = rng.uniform(0.5, 2.0, n) if name.startswith("sqrt") else rng.standard_normal(n)
    x[:3] = [0.0, -0.0, 1e-8] if not name.startswith("sqrt") else x[:3]
    inputs = [x.astype(dtype)] + [rng.standard_normal(n).astype(dtype) for _ in rule.inputs[1:]]
    start = rng.standard_normal(n).astype(dtype) if rule.accumulate else np.zeros(n, dtype)
    got, expected = start.copy(), start.copy()
    pointer = ctypes.POINTER(ctypes.c_double if dtype == "float64" else ctypes.c_float)
    function = getattr(host_library, f"{name}_{dtype}")
    function(*[a.ctypes.data_as(pointer) for a in (*inputs, got)], ctypes.c_long(n))
    reference.KERNELS[name](*inputs, expected)
    rtol, atol = TOLERANCE[dtype]
    np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol, err_msg=name)


def test_float_kernels_get_float_literals():
    """1.0 becomes 1.0f in float kernels (a double literal would widen the math), never
    inside a name or a longer number; double kernels keep the text."""
    text = "0.5 * x1 * (1.0 + RSQRT2) + 3.0e-5 - 2"
    assert _typed_literals(text, "float") == "0.5f * x1 * (1.0f + RSQRT2) + 3.0e-5f - 2"
    assert _typed_literals(text, "double") == text


def test_cuda_source_names_the_dtype_and_accumulates():
    params, out, operation = cuda_source(ELEMENTWISE["gelu_backward"], "float32")
    assert (params, out) == ("float32 x, float32 dy", "float32 dx")
    assert operation.splitlines()[-1].startswith("dx += ")
    assert "const float RSQRT2 = 0.7071067811865475f;" in operation
