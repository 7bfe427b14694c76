"""Compiling the CPU kernels prints no numba warning: a NumbaIRAssumptionWarning ("please
report ... to numba") at a cold compile reads as breakage. numba raised it where a helper
of the formulas (cpu_fastmath's where, nan_maximum, nan_minimum) was inlined into its IR
(inline="always") twice in one function; they are plain calls now, which LLVM inlines.
"""

import os
import pickle
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from numba import njit
from numba.core.errors import NumbaWarning

from nntile_kernels.cpu_fastmath import (fast_erf, fast_exp, fast_tanh, nan_maximum,
                                         nan_minimum, numpy_power, where)

ROOT = Path(__file__).resolve().parents[2]


def _every_helper_twice(x, y):
    for i in range(x.size):
        a = where(x[i] > 0.0, x[i], where(x[i] < -1.0, 1.0, 0.0))
        b = nan_minimum(nan_maximum(a, 0.5), nan_maximum(x[i], 1.5)) + nan_minimum(a, 0.0)
        c = numpy_power(x[i], 2.0) + numpy_power(a, 1.5)
        d = fast_exp(x[i]) + fast_exp(a) + fast_tanh(b) + fast_tanh(c) + fast_erf(a)
        y[i] = d + fast_erf(b)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_formula_helpers_called_twice_in_a_loop_compile_without_warnings(dtype):
    x = np.linspace(-2.0, 2.0, 9, dtype=dtype)
    y = np.empty_like(x)
    with warnings.catch_warnings():
        warnings.simplefilter("error", NumbaWarning)
        njit(error_model="numpy")(_every_helper_twice)(x, y)   # a fresh dispatcher: compiles
    assert np.isfinite(y).all()


# The kernels whose first compile warned (fp32 and fp64 alike), compiled from the
# precompile manifest's fp64 signatures in a process of their own over an empty numba
# cache (one dtype: the warning came from the IR, not the types; half the compile time).
WARNED = {("nntile_kernels.cpu_rules_softmax", "_logsumexp"),
          ("nntile_kernels.cpu_rules_picked", "_cross_entropy_lse"),
          ("nntile_kernels.cpu_rules_loss", "_cross_entropy_lse_backward")}
COMPILE = """
import importlib, pickle, sys, warnings
from numba.core.errors import NumbaWarning
warnings.simplefilter("error", NumbaWarning)
for module, name, signature in pickle.loads(sys.stdin.buffer.read()):
    getattr(importlib.import_module(module), name).compile(signature)
"""


def test_the_kernels_that_warned_compile_cleanly_on_an_empty_cache(tmp_path):
    from nntile_spmd.precompile import MANIFEST
    entries = [entry for entry in pickle.loads(MANIFEST.read_bytes())
               if entry[:2] in WARNED and "float64" in str(entry[2][0])]
    assert {entry[:2] for entry in entries} == WARNED
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path), PYTHONPATH=str(ROOT))
    result = subprocess.run([sys.executable, "-c", COMPILE], input=pickle.dumps(entries),
                            env=env, cwd=ROOT, capture_output=True, timeout=300)
    assert result.returncode == 0, result.stderr.decode()[-3000:]
    assert any(tmp_path.rglob("*.nbi"))   # it compiled into the empty cache
