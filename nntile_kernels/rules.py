"""The rule language: a formula written once for every backend (Rule, an elementwise
op's; Update, an optimizer step's), what evaluates it with an array module, and the
helpers every backend reads it with. The formulas themselves are formulas/'s, one module
per op family (formulas/elementwise.py: the activations, add, scale, hypot, pow, ...;
formulas/optimizers.py: SGD, Adam, AdamW).

Pure Python, imports nothing heavy (no numpy, numba or cupy). A formula is an
expression in the common subset of Python and C++: the array backends evaluate it
with their array module (ArrayRule, ArrayUpdate below; generic.py binds them to NumPy
or CuPy), cuda.py and cuda_fused.py compile the very same text into CuPy
ElementwiseKernels (rules_cuda.py), and the numba loops of the cpu table and of its
fused chains are generated from it too (rules_numba.py; cpu_rules*.py,
fused_rules.py), so no backend can drift from another.

The slice and fiber ops, whose operands broadcast along an axis (add_slice,
softmax_from_logsumexp, add_fiber, scale_fiber, ...), are rules in this language too:
rules_broadcast.py's Broadcast names which inputs broadcast, and its loops are generated
apart (generate_cpu_broadcast.py, cpu_rules_broadcast.py). The reductions along an axis
(sum_slice, sumprod_fiber, max_slice, ...) reduce a term in this language
(rules_reduce.py; generate_cpu_reduce.py, cpu_rules_reduce.py), and so does the softmax
family (softmax, logsumexp, maxsumexp: rules_softmax.py; generate_cpu_softmax.py,
cpu_rules_softmax.py).
"""
import builtins
import inspect
import math
import re
from dataclasses import dataclass

# Functions a formula may call: each backend binds these names (rule_namespace, the C++
# math library plus rules_cuda.CUDA_PREAMBLE, NUMBA_FUNCTIONS). maximum and minimum are NaN
# if either argument is (NumPy's); where(c, a, b) is a where c holds, else b; pow is
# NumPy's power on the CPU (numba's numpy_power follows its exact fast paths). Literals are
# written with a dot (1.0), never Python's ** or C's ?:, so the text means the same in both
# languages (tests/kernels/test_kernels_rules.py compiles the C++ for the host and compares).
FUNCTIONS = ("erf", "exp", "fabs", "hypot", "isfinite", "log", "log1p", "maximum", "minimum",
             "pow", "sigmoid", "sqrt", "tanh", "where")

CONSTANTS = {
    "RSQRT2": 1.0 / math.sqrt(2.0),
    "RSQRT_2PI": 1.0 / math.sqrt(2.0 * math.pi),
    "SQRT_2_OVER_PI": math.sqrt(2.0 / math.pi),
    "GELU_TANH_CUBIC": 0.044715,
}


@dataclass(frozen=True)
class Rule:
    """out = value (or out += value when accumulate) of the inputs, after the `let` temps.

    `params` are scalar keyword parameters (`defaults` gives some a default): a value
    sees them cast to the tile dtype, so fp32 tiles compute in fp32. `cases` are
    ((condition, value), ...): where a condition on the parameters as given (float64)
    holds, the first such value replaces `value`; an input it does not name is not read,
    so garbage (NaN) in it cannot leak (add's y when beta == 0).
    """

    inputs: tuple
    output: str
    value: str
    accumulate: bool = False
    let: tuple = ()  # ((name, expression), ...) evaluated in order before `value`
    params: tuple = ()
    defaults: tuple = ()  # ((param, value), ...)
    cases: tuple = ()  # ((condition on params, value), ...)

    def __post_init__(self):
        for condition, _ in self.cases:
            assert names_in(condition) <= set(self.params), f"{condition}: params only"
        # a param may share a function's name (pow's `exp`) where no formula calls it
        texts = [text for _, text in (*self.let, *self.branches())]
        called = {name for text in texts for name in _CALLED.findall(text)}
        assert not called & set(self.params), f"{self}: a param called as a function"

    def __repr__(self):
        sign = "+=" if self.accumulate else "="
        return f"Rule({self.output} {sign} {self.value})"

    def branches(self):
        """(condition or None, value) in the order they are tried."""
        return (*self.cases, (None, self.value))

    def reads_tiles(self):
        """Whether the rule reads a tile (its inputs, or its output when it accumulates):
        one that does not writes a constant (clear, fill), a fill rather than a loop."""
        return bool(self.inputs) or self.accumulate


@dataclass(frozen=True)
class Update:
    """State tiles updated in place, element by element (an optimizer step).

    The arrays are the `counter` (a 0-d int64 tile: the 1-based step), the `inputs`,
    then the `state` tiles. `uniform` values ((name, expression), ...) are computed once
    per call in float64 from the params and the counter; the element formulas see them
    and the params cast to the tile dtype. `assign` ((state tile, value, cases), ...)
    runs in order, each value seeing the new values of the tiles assigned before it; a
    case's condition is on the params and uniform values (float64), and a value that
    does not name a state tile does not read it (moments at step 1 may be
    uninitialized). A first case whose value is SKIP leaves its tile unread and
    unwritten where it holds (SGD's velocity without momentum); its condition names
    params only, so every backend decides it once per call.
    """

    counter: str
    inputs: tuple
    state: tuple
    params: tuple
    defaults: tuple
    uniform: tuple
    let: tuple
    assign: tuple

    def __post_init__(self):
        for _, _, cases in self.assign:
            for index, (condition, value) in enumerate(cases):
                assert value is not SKIP or (index == 0 and names_in(condition) <= set(
                    self.params)), f"{condition}: a skip is the first case, on params only"

    def __repr__(self):
        return f"Update({', '.join(name for name, _, _ in self.assign)})"


# The value of an Update's case that leaves its state tile as it is (see Update).
SKIP = None


def skip_condition(cases):
    """The condition under which an assign leaves its tile alone, or None."""
    return cases[0][0] if cases and cases[0][1] is SKIP else None


def computed_cases(cases):
    """An assign's cases that compute a value (its skip case left out)."""
    return tuple(case for case in cases if case[1] is not SKIP)


_NAME = re.compile(r"\b[A-Za-z_]\w*\b")
_CALLED = re.compile(r"\b([A-Za-z_]\w*)\(")


def names_in(text):
    """The names an expression mentions (functions and constants included)."""
    return set(_NAME.findall(text))


def renamed(text, names, pattern="{}"):
    """`text` with each of `names` replaced by pattern.format(name), or by names[name]
    where `names` is a dict."""
    def replace(match):
        name = match.group(0)
        if name not in names:
            return name
        return names[name] if isinstance(names, dict) else pattern.format(name)
    return _NAME.sub(replace, text)


# log(exp(a) + exp(b)) of two log-space values (partial logsumexps): the larger plus
# log1p(exp(the smaller - it)). -inf is an entry that takes no part (a masked score): two
# -inf give -inf, never NaN, as the shift is 0.0 where the larger is not finite (no
# inf - inf; CuPy's own logaddexp computes fabs(a - b), NaN for two -inf); +inf wins and
# NaN stays NaN. Written once as let temps over the temps `a`, `b`: logsumexp_merge's
# rule and logsumexp's merge (formulas/reductions.py) both read this text.
LOG_ADD_EXP = ((("top", "maximum(a, b)"), ("low", "minimum(a, b)"),
                ("shift", "where(isfinite(top), top, 0.0)")),
               "where(isfinite(top), shift + log1p(exp(low - shift)), top)")


def rule_namespace(xp, special):
    """The names a formula calls, bound to an array module and its scipy.special.

    The formula sees no builtins but `__import__`: C code that imports (CuPy compiling a
    ufunc for a dtype it meets first, e.g. float16) looks `__import__` up in the builtins
    of the Python frame that called it, which is this eval (PyImport_Import); with no
    builtins at all that raised KeyError: '__import__'.
    """
    functions = dict(erf=special.erf, exp=xp.exp, fabs=xp.fabs, hypot=xp.hypot,
                     isfinite=xp.isfinite, log=xp.log, log1p=xp.log1p, maximum=xp.maximum,
                     minimum=xp.minimum, pow=xp.power,
                     sigmoid=special.expit, sqrt=xp.sqrt, tanh=xp.tanh, where=xp.where)
    assert set(functions) == set(FUNCTIONS), "every portable function is bound"
    return {"__builtins__": {"__import__": builtins.__import__}, **functions, **CONSTANTS,
            "__xp__": xp}


def rule_signature(rule):
    """The signature every backend's entry has: the arrays positional (a rule's inputs
    then its output; an update's counter, inputs, state), the params keyword-only."""
    if isinstance(rule, Update):
        arrays = (rule.counter, *rule.inputs, *rule.state)
    else:
        arrays = (*rule.inputs, rule.output)
    defaults = dict(rule.defaults)
    return inspect.Signature(
        [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD) for name in arrays]
        + [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY,
                             default=defaults.get(name, inspect.Parameter.empty))
           for name in rule.params])


def given_params(name, rule, params):
    """The call's params with the rule's defaults filled in; a missing or unknown one raises."""
    given = {**dict(rule.defaults), **params}
    if given.keys() != set(rule.params):
        raise TypeError(f"{name}: takes the parameters {', '.join(rule.params) or 'none'}, "
                        f"got {', '.join(sorted(params)) or 'none'}")
    return given


def needed_let(rule, text):
    """The let temps that `text` needs, in order: a case's value leaves the others
    uncomputed (logsumexp_merge's log(beta) of its y where beta == 0)."""
    needed = names_in(text)
    for temp, expression in reversed(rule.let):
        if temp in needed:
            needed |= names_in(expression)
    return [(temp, expression) for temp, expression in rule.let if temp in needed]


class Evaluated:
    """A table entry that evaluates a rule's own text with an array module (NumPy or
    CuPy), compiled once: the formula stays a single string that C++ reads too,
    instead of a Python twin that could drift from it. Each rule family's entry
    subclasses it, naming the function that gives its kernel's signature."""

    signature = staticmethod(rule_signature)

    def __init__(self, name, rule, namespace):
        self.__name__ = self.__qualname__ = name
        self.__doc__ = repr(rule)
        self.rule = rule
        self.__signature__ = self.signature(rule)
        self._namespace, self._xp, self._codes = namespace, namespace.get("__xp__"), {}

    def _eval(self, text, scope):
        code = self._codes.get(text)
        if code is None:
            code = self._codes[text] = compile(text, f"<{self.__name__}>", "eval")
        return eval(code, self._namespace, scope)


class ArrayRule(Evaluated):
    """A Rule evaluated by array expressions: the table entry itself."""

    def __call__(self, *arrays, **params):
        rule = self.rule
        given = given_params(self.__name__, rule, params) if params or rule.params else {}
        # the first case whose condition holds; params are Python floats, so it is a bool
        text = next(value for condition, value in rule.branches()
                    if condition is None or self._eval(condition, dict(given)))
        out = arrays[len(rule.inputs)]
        if out.dtype.kind in "iu":   # a Python float would make an integer tile's math float64
            given = {name: out.dtype.type(value) for name, value in given.items()}
        scope = {**given, **dict(zip(rule.inputs, arrays))}
        for temp, expression in needed_let(rule, text):
            scope[temp] = self._eval(expression, scope)
        value = self._eval(text, scope)
        if rule.accumulate:
            out += value
        else:
            out[...] = value


class ArrayUpdate(Evaluated):
    """An Update evaluated by array expressions. The counter stays a 0-d array: a
    condition on it is a 0-d CuPy array, taken by `where` (both values computed, the
    unselected one discarded) so that the host never waits for the device."""

    def __call__(self, counter, *arrays, **params):
        rule, xp = self.rule, self._namespace["__xp__"]
        given = given_params(self.__name__, rule, params)
        wide = {**given, rule.counter: counter.astype(xp.float64)}
        for name, expression in rule.uniform:
            wide[name] = self._eval(expression, wide)
        tiles = dict(zip((*rule.inputs, *rule.state), arrays))
        dtype = tiles[rule.state[0]].dtype
        scope = {**given, **tiles, **{name: xp.asarray(wide[name], dtype)
                                      for name, _ in rule.uniform}}
        for temp, expression in rule.let:
            scope[temp] = self._eval(expression, scope)
        skipped = set()
        for name, value, cases in rule.assign:
            skip = skip_condition(cases)
            if skip is not None and self._eval(skip, given):
                skipped.add(name)
            else:
                scope[name] = self._chosen(computed_cases(cases), value, scope, wide, xp)
        for name in rule.state:
            if name not in skipped:
                tiles[name][...] = scope[name]

    def _chosen(self, cases, value, scope, wide, xp):
        """The value of the first case that holds (else `value`), evaluating no other
        where the condition is known on the host."""
        if not cases:
            return self._eval(value, scope)
        (condition, case_value), rest = cases[0], cases[1:]
        holds = self._eval(condition, wide)
        if isinstance(holds, xp.ndarray):
            return xp.where(holds, self._eval(case_value, scope),
                            self._chosen(rest, value, scope, wide, xp))
        return (self._eval(case_value, scope) if holds
                else self._chosen(rest, value, scope, wide, xp))


# A float literal of a formula (1.0, 3.0e-5): typed for the tile dtype in C++ and numba.
FLOAT_LITERAL = re.compile(r"(?<![\w.])(\d+\.\d*(?:[eE][-+]?\d+)?)(?![\w.])")


def element_texts(rule):
    """Every expression a Rule or an Update evaluates per element, in the tile dtype."""
    if isinstance(rule, Update):
        assigned = [(value, *(case for _, case in computed_cases(cases)))
                    for _, value, cases in rule.assign]
        return [text for _, text in rule.let] + [text for texts in assigned for text in texts]
    return [text for _, text in rule.let] + [value for _, value in rule.branches()]
