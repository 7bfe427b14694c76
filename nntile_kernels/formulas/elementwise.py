"""The elementwise family's formulas: the activations (gelu, gelutanh, relu, silu, sqrt,
tanh, sigmoid) and their backwards; add, sub, multiply, div, scale, clear, fill; hypot
and its backward, hypot_scalar_inverse; pow and its backward, add_scalar.

Rules of rules.py's language (Rule): every backend evaluates or compiles this text.
"""

from ..rules import Rule


def _forward(value, let=()):
    return Rule(("x",), "y", value, let=let)


def _backward(value, let=()):
    return Rule(("x", "dy"), "dx", value, accumulate=True, let=let)


_TANH_INNER = "tanh(SQRT_2_OVER_PI * (x + GELU_TANH_CUBIC * x * x * x))"

ELEMENTWISE = {
    "gelu": _forward("0.5 * x * (1.0 + erf(x * RSQRT2))"),
    "gelutanh": _forward("0.5 * x * (1.0 + t)", let=(("t", _TANH_INNER),)),
    "relu": _forward("maximum(x, 0.0)"),   # NaN stays NaN; relu(-inf) = 0
    # exp(-x) overflowing to inf gives 0, the right limit, for very negative x
    "silu": _forward("x / (1.0 + exp(-x))"),
    "sqrt": _forward("sqrt(x)"),
    "gelu_backward": _backward(
        "(0.5 * (1.0 + erf(x * RSQRT2)) + x * exp(-0.5 * x * x) * RSQRT_2PI) * dy"),
    "gelutanh_backward": _backward(
        "(0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * inner) * dy",
        let=(("t", _TANH_INNER),
             ("inner", "SQRT_2_OVER_PI * (1.0 + 3.0 * GELU_TANH_CUBIC * x * x)"))),
    "relu_backward": _backward("where(x > 0.0, dy, 0.0)"),   # relu'(0) = 0; no 0 * inf
    "silu_backward": _backward("s * (1.0 + x * (1.0 - s)) * dy", let=(("s", "sigmoid(x)"),)),
    "sqrt_backward": _backward("dy / (2.0 * sqrt(x))"),
    "tanh": _forward("tanh(x)"),
    "tanh_backward": _backward("(1.0 - t * t) * dy", let=(("t", "tanh(x)"),)),
    # 1 / (1 + exp(-x)) overflows exp for x << 0; the tanh form is finite everywhere
    "sigmoid": _forward("0.5 + 0.5 * tanh(0.5 * x)"),
    "sigmoid_backward": _backward("s * (1.0 - s) * dy", let=(("s", "0.5 + 0.5 * tanh(0.5 * x)"),)),
    "sub": Rule(("x", "y"), "z", "x - y"),
    "div": Rule(("x", "y"), "z", "x / y"),       # x / 0 is inf or NaN, as in NumPy
    # the linear ops; y is not read when beta == 0 (it may be uninitialized, or be z)
    "add": Rule(("x", "y"), "z", "alpha * x + beta * y", params=("alpha", "beta"),
                cases=(("beta == 0.0", "alpha * x"),)),
    "multiply": Rule(("x", "y"), "z", "alpha * x * y", params=("alpha",),
                     defaults=(("alpha", 1.0),)),
    "scale": Rule(("x",), "y", "alpha * x", params=("alpha",)),
    "clear": Rule((), "x", "0.0"),
    "fill": Rule((), "x", "value", params=("value",)),
    # NNTile's hypot; y is not read when beta == 0 (as add's)
    "hypot": Rule(("x", "y"), "z", "hypot(alpha * x, beta * y)", params=("alpha", "beta"),
                  defaults=(("alpha", 1.0), ("beta", 1.0)),
                  cases=(("beta == 0.0", "fabs(alpha * x)"),)),
    # 0 where z == 0 (x == 0 there, and 0 is the subgradient of |x| that keeps hypot's
    # gradient finite); `safe` keeps the discarded branch from dividing 0 by 0
    "hypot_backward": Rule(("x", "z", "dz"), "dx",
                           "where(z == 0.0, 0.0, alpha * alpha * x / safe * dz)",
                           accumulate=True, let=(("safe", "where(z == 0.0, 1.0, z)"),),
                           params=("alpha",), defaults=(("alpha", 1.0),)),
    "hypot_scalar_inverse": Rule(("x",), "y", "1.0 / hypot(alpha * x, eps)",
                                 params=("eps", "alpha"), defaults=(("alpha", 1.0),)),
}

# NNTile's pow: y = alpha * x**exp (LayerNorm's rstd is exp = -0.5). An exponent of 2
# squares, decided once per call: x * x vectorises where a loop of pow calls does not,
# and it is exactly what NumPy's power computes for a scalar 2 (libm's pow may miss the
# last bit), so the reference, the loops and the fused chains agree bitwise; pow(x, 1.0)
# is x, so the backward's case agrees with its general formula. `exp` shadows the
# function of that name: these formulas call no exp().
_POW_PARAMS = dict(params=("alpha", "exp"), defaults=(("alpha", 1.0), ("exp", 1.0)))
ELEMENTWISE.update({
    "pow": Rule(("x",), "y", "alpha * pow(x, exp)",
                cases=(("exp == 2.0", "alpha * (x * x)"),), **_POW_PARAMS),
    "pow_backward": Rule(("x", "dy"), "dx", "alpha * exp * pow(x, exp - 1.0) * dy",
                         accumulate=True, cases=(("exp == 2.0", "alpha * exp * x * dy"),),
                         **_POW_PARAMS),
    # x += value in place, on float tiles (LayerNorm's var += eps) and on the int64 step
    # counters: value is cast to the tile dtype (exact for whole numbers) like every param
    "add_scalar": Rule((), "x", "value", accumulate=True, params=("value",)),
})
