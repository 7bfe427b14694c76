"""Building the rules' C++ for the host (test_kernels_rules.py, test_broadcast_rules_cpp.py):
the text a GPU compiles, checked without a GPU.

Without a C++ compiler on PATH those checks skip, saying so; NNTILE_SPMD_REQUIRE_CXX=1
(.ci/run sets it) turns the skip into a failure, so CI never loses them silently."""

import ctypes
import os
import shutil
import subprocess

import pytest

CXX = shutil.which("g++") or shutil.which("c++")

# the C++ math library's float and double overloads under the names the formulas call
# (CUDA's device functions); rules_cuda.CUDA_PREAMBLE follows this
HOST_PRELUDE = """
#include <cmath>
using std::erf; using std::exp; using std::fabs; using std::fmax; using std::hypot;
using std::isfinite; using std::log; using std::log1p; using std::pow; using std::sqrt;
using std::tanh;
#define __device__
"""


def host_library(folder, source):
    """`source` (after HOST_PRELUDE) compiled into a shared library in `folder`, loaded."""
    if CXX is None:
        reason = ("no C++ compiler (g++ or c++) on PATH: the rules' CUDA text is not "
                  "compiled for the host")
        if os.environ.get("NNTILE_SPMD_REQUIRE_CXX"):
            pytest.fail(f"NNTILE_SPMD_REQUIRE_CXX is set but there is {reason}")
        pytest.skip(reason)
    (folder / "rules.cpp").write_text(HOST_PRELUDE + source)
    library = folder / "rules.so"
    subprocess.run([CXX, "-O1", "-shared", "-fPIC", "-o", str(library), str(folder / "rules.cpp")],
                   check=True, capture_output=True, text=True)
    return ctypes.CDLL(str(library))
