"""Building the rules' C++ for the host (test_broadcast_rules_cpp.py; the same build as
test_kernels_rules.py's fixture, which can call this too): the text a GPU compiles,
checked without a GPU."""

import ctypes
import shutil
import subprocess

import pytest

CXX = shutil.which("g++") or shutil.which("c++")

# the C++ math library's float and double overloads under the names the formulas call
# (CUDA's device functions); rules_cuda.CUDA_PREAMBLE follows this
HOST_PRELUDE = """
#include <cmath>
using std::erf; using std::exp; using std::fabs; using std::fmax; using std::hypot;
using std::isfinite; using std::pow; using std::sqrt; using std::tanh;
#define __device__
"""


def host_library(folder, source):
    """`source` (after HOST_PRELUDE) compiled into a shared library in `folder`, loaded."""
    if CXX is None:
        pytest.skip("needs a C++ compiler (g++) to build the rules' C++ for the host")
    (folder / "rules.cpp").write_text(HOST_PRELUDE + source)
    library = folder / "rules.so"
    subprocess.run([CXX, "-O1", "-shared", "-fPIC", "-o", str(library), str(folder / "rules.cpp")],
                   check=True, capture_output=True, text=True)
    return ctypes.CDLL(str(library))
