"""A formula of the rule language as numba source: the functions it calls renamed to
cpu_fastmath's (or libm's, in a loop that does not vectorise), sigmoid spelled out, and
each float literal a named constant cast to the tile dtype. Every numba generator
(generate_cpu_*.py) and the fused chains (fused_rules.py) write their loops with it.

Pure Python, imports rules.py only (numba_constants reads formulas/ at its call).
"""

import re

from .rules import CONSTANTS, FLOAT_LITERAL, element_texts

# A formula's functions in the numba kernels: cpu_fastmath's (vectorisable float32
# approximations, libm for float64) and its maximum, minimum (named apart from the kernels
# of the same names), where and numpy_power; sigmoid is spelled out.
NUMBA_FUNCTIONS = {"erf": "fast_erf", "exp": "fast_exp", "tanh": "fast_tanh",
                   "pow": "numpy_power", "sqrt": "math.sqrt", "hypot": "math.hypot",
                   "fabs": "abs", "maximum": "nan_maximum", "minimum": "nan_minimum",
                   "where": "where", "isfinite": "math.isfinite", "log": "math.log",
                   "log1p": "math.log1p"}
# Functions that numba has from libm alone: a loop calling one stays scalar, and there the
# float32 approximations, which pay off only vectorised, cost more than libm's own calls
# (NUMBA_SCALAR; float64 is libm's either way).
LIBM_ONLY = ("log", "log1p", "hypot")
NUMBA_SCALAR = {**NUMBA_FUNCTIONS, "erf": "math.erf", "exp": "math.exp", "tanh": "math.tanh"}
_SIGMOID = re.compile(r"\bsigmoid\(([^()]*)\)")
_CALL = re.compile(r"\b(" + "|".join(NUMBA_FUNCTIONS) + r")\(")
_LIBM_ONLY_CALL = re.compile(r"\b(" + "|".join(LIBM_ONLY) + r")\(")


def literal_name(literal):
    """The constant a float literal becomes in numba source: 0.5 -> L0_5."""
    return "L" + re.sub(r"\W", "_", literal.replace("-", "m").replace("+", "p"))


def spelled_out(text):
    """The formula with sigmoid(v) written as 1 / (1 + exp(-v)) (no numba or C++ sigmoid)."""
    text = _SIGMOID.sub(r"(1.0 / (1.0 + exp(-(\1))))", text)
    assert "sigmoid(" not in text, f"sigmoid of a parenthesised argument: {text}"
    return text


def vectorises(texts):
    """Whether a loop computing `texts` per element can vectorise: none calls LIBM_ONLY."""
    return not any(_LIBM_ONLY_CALL.search(text) for text in texts)


def numba_expression(text, vectorised=True):
    """A formula as numba source: sigmoid spelled out, functions renamed (libm's in a loop
    that does not vectorise: `vectorised` False), and each float literal a named constant
    that the loop casts to the tile dtype (a bare 0.5 is a float64 and would widen fp32
    math, as 1.0 would in C++: rules_cuda.typed_literals)."""
    names = NUMBA_FUNCTIONS if vectorised else NUMBA_SCALAR
    text = _CALL.sub(lambda match: names[match.group(1)] + "(", spelled_out(text))
    return FLOAT_LITERAL.sub(lambda match: literal_name(match.group(1)), text)


def numba_constants():
    """name -> value of every constant numba formulas use: CONSTANTS and the literals."""
    from .formulas import ELEMENTWISE, UPDATES   # formulas import this module: no cycle
    values = dict(CONSTANTS)
    for rule in (*ELEMENTWISE.values(), *UPDATES.values()):
        for text in element_texts(rule):
            for literal in FLOAT_LITERAL.findall(spelled_out(text)):
                values[literal_name(literal)] = float(literal)
    return values
