"""The elementwise rule table: each activation's formula, written once for every backend.

Pure Python, imports nothing heavy (no numpy, numba or cupy). A formula is an
expression in the common subset of Python and C++: the array backends evaluate it
with their array module (generic.py, on NumPy or CuPy arrays), cuda.py compiles the
very same text into a CuPy ElementwiseKernel (cuda_source below), and the numba loops
of the cpu table and of its fused chains are generated from it too (numba_expression
below; cpu_rules.py, fused_rules.py), so no backend can drift from another.
"""

import builtins
import inspect
import math
import re
from dataclasses import dataclass

# Functions a formula may call: each backend binds these names (rule_namespace, the C++
# math library plus CUDA_PREAMBLE, NUMBA_FUNCTIONS). maximum is NaN if either argument
# is (NumPy's maximum); where(c, a, b) is a where c holds, else b. Literals are written with a
# dot (1.0), never Python's ** or C's ?:, so the text means the same in both languages
# (tests/kernels/test_kernels_rules.py compiles the C++ for the host and compares).
FUNCTIONS = ("erf", "exp", "maximum", "sigmoid", "sqrt", "tanh", "where")

CONSTANTS = {
    "RSQRT2": 1.0 / math.sqrt(2.0),
    "RSQRT_2PI": 1.0 / math.sqrt(2.0 * math.pi),
    "SQRT_2_OVER_PI": math.sqrt(2.0 / math.pi),
    "GELU_TANH_CUBIC": 0.044715,
}


@dataclass(frozen=True)
class Rule:
    """out = value (or out += value when accumulate) of the inputs, after the `let` temps."""

    inputs: tuple
    output: str
    value: str
    accumulate: bool = False
    let: tuple = ()  # ((name, expression), ...) evaluated in order before `value`

    def __repr__(self):
        sign = "+=" if self.accumulate else "="
        return f"Rule({self.output} {sign} {self.value})"


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
}


def rule_namespace(xp, special):
    """The names a formula calls, bound to an array module and its scipy.special.

    The formula sees no builtins but `__import__`: C code that imports (CuPy compiling a
    ufunc for a dtype it meets first, e.g. float16) looks `__import__` up in the builtins
    of the Python frame that called it, which is this eval (PyImport_Import); with no
    builtins at all that raised KeyError: '__import__'.
    """
    functions = dict(erf=special.erf, exp=xp.exp, maximum=xp.maximum, sigmoid=special.expit,
                     sqrt=xp.sqrt, tanh=xp.tanh, where=xp.where)
    assert set(functions) == set(FUNCTIONS), "every portable function is bound"
    return {"__builtins__": {"__import__": builtins.__import__}, **functions, **CONSTANTS}


def rule_signature(rule):
    """The positional signature (inputs, then the output) every backend's entry has."""
    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    return inspect.Signature([inspect.Parameter(name, kind)
                              for name in (*rule.inputs, rule.output)])


class ArrayRule:
    """A rule evaluated by array expressions (NumPy or CuPy): the table entry itself."""

    def __init__(self, name, rule, namespace):
        self.__name__ = self.__qualname__ = name
        self.__doc__ = repr(rule)
        self.rule = rule
        self.__signature__ = rule_signature(rule)
        self._namespace = namespace
        self._let = tuple((temp, compile(text, f"<{name}>", "eval")) for temp, text in rule.let)
        self._value = compile(rule.value, f"<{name}>", "eval")

    def __call__(self, *arrays):
        rule = self.rule
        scope = dict(zip(rule.inputs, arrays))
        # eval of the table's own text, compiled once: the formula stays a single
        # string that C++ reads too, instead of a Python twin that could drift from it.
        for temp, code in self._let:
            scope[temp] = eval(code, self._namespace, scope)
        value = eval(self._value, self._namespace, scope)
        out = arrays[len(rule.inputs)]
        if rule.accumulate:
            out += value
        else:
            out[...] = value


# ---------------------------------------------------------------- C++ for CuPy

# C++ has erf/exp/sqrt/tanh overloads for float and double; the rest are ours.
CUDA_PREAMBLE = """
template <typename W> __device__ W sigmoid(W x) { return W(1) / (W(1) + exp(-x)); }
template <typename W> __device__ W maximum(W a, W b) { return (a != a || a > b) ? a : b; }
template <typename W> __device__ W where(bool c, W a, W b) { return c ? a : b; }
"""

_FLOAT_LITERAL = re.compile(r"(?<![\w.])(\d+\.\d*(?:[eE][-+]?\d+)?)(?![\w.])")


def _typed_literals(text, ctype):
    """float kernels get 1.0f literals: a bare 1.0 is a double and would widen the math."""
    return _FLOAT_LITERAL.sub(r"\1f", text) if ctype == "float" else text


# CuPy names a parameter's type by its NumPy dtype; the operation is C++.
C_TYPES = {"float32": "float", "float64": "double"}


def cuda_source(rule, dtype_name):
    """(in_params, out_params, operation) of a CuPy ElementwiseKernel for one float dtype."""
    ctype = C_TYPES[dtype_name]
    params = ", ".join(f"{dtype_name} {name}" for name in rule.inputs)
    lines = [f"const {ctype} {name} = {value!r};" for name, value in CONSTANTS.items()]
    lines += [f"const {ctype} {temp} = {text};" for temp, text in rule.let]
    lines.append(f"{rule.output} {'+=' if rule.accumulate else '='} {rule.value};")
    operation = _typed_literals("\n".join(lines), ctype)
    return params, f"{dtype_name} {rule.output}", operation


# ---------------------------------------------------------------- numba loops

# A formula's functions in the numba kernels: cpu_fastmath's (vectorisable float32
# approximations, libm for float64) and its maximum and where; sigmoid is spelled out.
NUMBA_FUNCTIONS = {"erf": "fast_erf", "exp": "fast_exp", "tanh": "fast_tanh",
                   "sqrt": "math.sqrt", "maximum": "maximum", "where": "where"}
_SIGMOID = re.compile(r"\bsigmoid\(([^()]*)\)")
_CALL = re.compile(r"\b(" + "|".join(NUMBA_FUNCTIONS) + r")\(")


def literal_name(literal):
    """The constant a float literal becomes in numba source: 0.5 -> L0_5."""
    return "L" + re.sub(r"\W", "_", literal.replace("-", "m").replace("+", "p"))


def _spelled_out(text):
    text = _SIGMOID.sub(r"(1.0 / (1.0 + exp(-(\1))))", text)
    assert "sigmoid(" not in text, f"sigmoid of a parenthesised argument: {text}"
    return text


def numba_expression(text):
    """A formula as numba source: sigmoid spelled out, functions renamed, and each float
    literal a named constant that the loop casts to the tile dtype (a bare 0.5 is a
    float64 and would widen fp32 math, as 1.0 would in C++: _typed_literals)."""
    text = _CALL.sub(lambda match: NUMBA_FUNCTIONS[match.group(1)] + "(", _spelled_out(text))
    return _FLOAT_LITERAL.sub(lambda match: literal_name(match.group(1)), text)


def numba_constants():
    """name -> value of every constant numba formulas use: CONSTANTS and the literals."""
    values = dict(CONSTANTS)
    for rule in ELEMENTWISE.values():
        for text in (rule.value, *(expression for _, expression in rule.let)):
            for literal in _FLOAT_LITERAL.findall(_spelled_out(text)):
                values[literal_name(literal)] = float(literal)
    return values
