"""Vectorisable tanh, erf and exp for the numba kernels: one scalar function per name,
specialised by the argument's type; and the other functions the portable formulas
(rules.py's language) call (maximum and minimum as nan_maximum and
nan_minimum, where, pow as numpy_power), for the numba loops generated from them.

Arrays only: never imports nntile_spmd, mpi4py or cupy. numba has no vector math library
here (no SVML), so `math.tanh` on float32 is one libm call per element. For float32 the
functions below are branch-free arithmetic that LLVM vectorises: Eigen's rational
approximations of tanh and erf (within 5e-7 of the exact value) and exp by Cody-Waite
reduction, a degree-6 polynomial and 2^n built from its bits. float64 keeps libm's
correctly rounded calls, so fp64 results (the bitwise tests) are unchanged.

Kernels that call these must be compiled with error_model="numpy": under numba's
default a division checks for zero and raises, a branch that stops vectorisation.
"""

import math

import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic, overload, register_jitable

F32 = np.float32


def fast_tanh(x):
    """tanh(x); float32: Eigen's rational approximation on [-7.9, 7.9] (saturates beyond)."""
    return math.tanh(x)


def fast_erf(x):
    """erf(x); float32: Eigen's rational approximation on [-4, 4] (saturates beyond)."""
    return math.erf(x)


def fast_exp(x):
    """exp(x); float32: 0 below -87.3 (no subnormal results), inf above 88.72."""
    return math.exp(x)


TANH_CLAMP = F32(7.90531110763549805)
TANH_P = tuple(map(F32, (4.89352455891786e-03, 6.37261928875436e-04, 1.48572235717979e-05,
                         5.12229709037114e-08, -8.60467152213735e-11, 2.00018790482477e-13,
                         -2.76076847742355e-16)))
TANH_Q = tuple(map(F32, (4.89352518554385e-03, 2.26843463243900e-03, 1.18534705686654e-04,
                         1.19825839466702e-06)))
ERF_CLAMP = F32(4.0)
ERF_P = tuple(map(F32, (-1.60960333262415e-02, -2.95459980854025e-03, -7.34990630326855e-04,
                        -5.69250639462346e-05, -2.10102402082508e-06, 2.77068142495902e-08,
                        -2.72614225801306e-10)))
ERF_Q = tuple(map(F32, (-1.42647390514189e-02, -7.37332916720468e-03, -1.68282697438203e-03,
                        -2.13374055278905e-04, -1.45660718464996e-05)))
LOG2E = F32(1.4426950408889634)
LN2_HI, LN2_LO = F32(0.693359375), F32(-2.12194440e-4)   # ln 2 in two parts (Cody-Waite)
EXP_P = tuple(map(F32, (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2,
                        1.6666665459e-1, 5.0000001201e-1)))
EXP_LOW, EXP_HIGH = F32(-87.33654), F32(88.72283)   # exp below is subnormal, above overflows
HALF, ONE, ZERO, INF = F32(0.5), F32(1.0), F32(0.0), F32(np.inf)


@intrinsic
def _float32_from_bits(typingctx, bits):
    """The float32 whose bit pattern is the int32 `bits` (2^n for (n + 127) << 23)."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.FloatType())
    return types.float32(types.int32), codegen


@register_jitable(inline="always")
def _power_of_two(k):
    return _float32_from_bits((k + np.int32(127)) << np.int32(23))


def _tanh32(x):
    # min/max keep a NaN (numba's max(nan, c) is nan): tanh(nan) stays nan
    x = min(max(x, -TANH_CLAMP), TANH_CLAMP)
    x2 = x * x
    p, q = TANH_P, TANH_Q
    num = x2 * (x2 * (x2 * (x2 * (x2 * (x2 * p[6] + p[5]) + p[4]) + p[3]) + p[2]) + p[1]) + p[0]
    den = x2 * (x2 * (x2 * q[3] + q[2]) + q[1]) + q[0]
    return x * num / den


def _erf32(x):
    x = min(max(x, -ERF_CLAMP), ERF_CLAMP)
    x2 = x * x
    p, q = ERF_P, ERF_Q
    num = x2 * (x2 * (x2 * (x2 * (x2 * (x2 * p[6] + p[5]) + p[4]) + p[3]) + p[2]) + p[1]) + p[0]
    den = x2 * (x2 * (x2 * (x2 * q[4] + q[3]) + q[2]) + q[1]) + q[0]
    return x * num / den


def _exp32(x):
    c = min(max(x, EXP_LOW), EXP_HIGH)
    n = np.floor(c * LOG2E + HALF)               # c = n ln2 + r, |r| <= ln2 / 2
    r = (c - n * LN2_HI) - n * LN2_LO
    p = EXP_P
    poly = ((((p[0] * r + p[1]) * r + p[2]) * r + p[3]) * r + p[4]) * r + p[5]
    y = poly * (r * r) + r + ONE
    # 2^n as 2^h * 2^(n - h), h = n // 2: both halves are normal floats for every n
    # the clamp allows (-126..128), so their exponent bits are simply (k + 127) << 23
    whole = np.int32(n)
    half = whole >> np.int32(1)
    y = (y * _power_of_two(half)) * _power_of_two(whole - half)
    y = ZERO if x < EXP_LOW else y
    return INF if x > EXP_HIGH else y


def _by_type(fast32):
    """The overload body: float32 gets `fast32`, every other type libm's function."""
    def typer(libm):
        def choose(x):
            if x == types.float32:
                return fast32
            return lambda x: libm(x)
        return choose
    return typer


overload(fast_tanh)(_by_type(_tanh32)(math.tanh))
overload(fast_erf)(_by_type(_erf32)(math.erf))
overload(fast_exp)(_by_type(_exp32)(math.exp))


# The other functions of the portable formulas (rules.py), as their C++ in rules_cuda.CUDA_PREAMBLE.
# Not inline="always" (numba's inlining of its IR): a function with a branch, inlined twice
# into one loop, fails numba's own check of that IR (a NumbaIRAssumptionWarning for numba
# to fix, at every cold compile); LLVM inlines these small calls into the loop all the same,
# where they vectorise as before (tests/kernels/test_numba_warnings.py).
@register_jitable
def nan_maximum(a, b):
    """The larger of a and b, NaN if either is NaN (NumPy's maximum). Two selects, not
    one over `a != a or a > b`: the `or` is a branch that LLVM keeps where the loop does
    not vectorise (a libm call in it), mispredicted on every other element of data."""
    larger = a if a > b else b
    return a if a != a else larger


@register_jitable
def nan_minimum(a, b):
    """The smaller of a and b, NaN if either is NaN (NumPy's minimum); two selects as
    nan_maximum."""
    smaller = a if a < b else b
    return a if a != a else smaller


@register_jitable
def where(condition, a, b):
    """a where condition holds, else b."""
    return a if condition else b


def numpy_power(x, e):
    """x**e as NumPy's power computes it for a scalar exponent (the reference's pow):
    its fast paths square (2), take the root (0.5) and the reciprocal (-1), each
    correctly rounded, where libm's pow (every other exponent, there as here) misses
    the last bit of about one result in a thousand; so the loops agree bitwise."""
    return x ** e


@overload(numpy_power, inline="always")
def _numpy_power(x, e):
    one = np.dtype(str(x)).type(1.0)   # x's own 1: a float64 1.0 would widen fp32 math

    def power(x, e):
        if e == 2.0:
            return x * x
        if e == 0.5:
            return math.sqrt(x)
        if e == -1.0:
            return one / x
        return math.pow(x, e)
    return power


# the names numba formulas call (rules_numba.NUMBA_FUNCTIONS), for source run by exec
FORMULA_NAMESPACE = {"math": math, "fast_erf": fast_erf, "fast_exp": fast_exp,
                     "fast_tanh": fast_tanh, "nan_maximum": nan_maximum, "nan_minimum": nan_minimum,
                     "numpy_power": numpy_power, "where": where}
