"""cpu_fastmath: the float32 approximations against float64 libm, special values included;
float64 keeps libm's exact results."""

import math

import numpy as np
import pytest
import scipy.special
from numba import njit

from nntile_kernels.cpu_fastmath import fast_erf, fast_exp, fast_tanh


@njit(error_model="numpy")
def _apply_tanh(x, y):
    for i in range(x.size):
        y[i] = fast_tanh(x[i])


@njit(error_model="numpy")
def _apply_erf(x, y):
    for i in range(x.size):
        y[i] = fast_erf(x[i])


@njit(error_model="numpy")
def _apply_exp(x, y):
    for i in range(x.size):
        y[i] = fast_exp(x[i])


CASES = {"tanh": (_apply_tanh, np.tanh, math.tanh),
         "erf": (_apply_erf, scipy.special.erf, math.erf),
         "exp": (_apply_exp, np.exp, math.exp)}
SPECIAL = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-30, -1e-30, 8.0, -8.0, 88.7, -87.3, -200.0]


@pytest.mark.parametrize("name", sorted(CASES))
def test_float32_within_a_few_ulps_of_the_exact_value(name):
    apply, exact, _ = CASES[name]
    low = -87.3 if name == "exp" else -20.0
    high = 88.7 if name == "exp" else 20.0
    x = np.concatenate([np.linspace(low, high, 400_001), np.linspace(-1, 1, 100_001)])
    x = x.astype(np.float32)
    y = np.empty_like(x)
    apply(x, y)
    expected = exact(x.astype(np.float64))
    relative = np.abs(y - expected) / np.maximum(np.abs(expected), np.finfo(np.float32).tiny)
    assert relative.max() < 5e-7, (name, x[relative.argmax()], relative.max())


@pytest.mark.parametrize("name", sorted(CASES))
def test_float32_special_values(name):
    apply, exact, _ = CASES[name]
    x = np.array(SPECIAL, np.float32)
    y = np.empty_like(x)
    apply(x, y)
    with np.errstate(over="ignore", under="ignore"):
        expected = exact(x.astype(np.float64)).astype(np.float32)
    assert np.isnan(y[0])
    finite = np.isfinite(expected[1:]) & (np.abs(expected[1:]) > np.finfo(np.float32).tiny)
    np.testing.assert_allclose(y[1:][finite], expected[1:][finite], rtol=5e-7)
    saturated = expected[1:][~finite]     # overflow to inf, underflow (subnormal) to 0
    assert (y[1:][~finite] == np.where(np.abs(saturated) < 1, 0, saturated)).all()
    assert np.signbit(y[4]) == (name != "exp")   # -0 stays -0 for the odd functions


@pytest.mark.parametrize("name", sorted(CASES))
def test_float64_is_libm(name):
    apply, _, libm = CASES[name]
    x = np.random.default_rng(0).standard_normal(1000) * 10
    y = np.empty_like(x)
    apply(x, y)
    assert y.tolist() == [libm(v) for v in x]
