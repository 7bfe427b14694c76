"""Rules that name where an element is: the masks (mask_scalar, mask_causal), the rotary
position embedding (rope, rope_backward) and the losses' class tiles (LOSSES:
cross_entropy_lse_backward; FROM_LSE: cross_entropy_backward's step after the table's
logsumexp, AfterLogsumexp), each written once in the language of rules.py: this is their
kind, its signature and evaluation; the formulas are formulas/'s (attention.py,
rope.py, losses.py).

An `Indexed` rule is a formula of the element (or, `paired`, of the pair of elements)
with what an elementwise rule lacks:

- `positions` name the element's index along the leading dims of the tile, integers; a
  case's condition compares them with the integer `offsets` params (mask_causal's key
  past its query), so a case picks the value by where the element is;
- `partners` hold only the tile's leading dims and are broadcast over its trailing
  ones: a partner of P elements goes with each F-order run of P elements (of P pairs
  when paired) of the tile; mask_scalar's bool mask picks x or val, rope's sin and cos
  rotate;
- `paired` tiles are seen as the pairs of adjacent elements along dim 0 (rope's
  (x[2i], x[2i+1])): an array `x` is `x0`, `x1` in the formulas, and `values` gives
  the two new values of the output's pair;
- `columns` hold the tile's dims after the position axes (one value per column: a
  loss's lse and label per position, beside its class position), `scalars` are 0-d
  (dloss, count), `integers` integer keywords the formulas read (ignore_index), and
  `let` names temps, as in rules.py; a loss compares its class position with the label
  (a one-hot) where the masks index nothing;
- `checks` are what the kernel raises on before it writes: labels outside the classes
  (numba does no bounds checks, CuPy would wrap an index), one host sync per call.

ArrayIndexed evaluates the text with NumPy or CuPy (generic.py binds it): positions are
aranges, partners expanded or folded to the tile, cases `where`s;
generate_cpu_indexed.py writes the numba loops (cpu_rules_indexed.py; LOSSES' and
FROM_LSE's cpu_rules_loss.py), and rules_cuda_indexed.py the C++ of a CUDA kernel of
INDEXED, LOSSES and FROM_LSE, so every backend reads one text.

Pure Python, imports rules.py and errors.py only.
"""

import inspect
from dataclasses import dataclass

from . import errors
from .rules import Evaluated, names_in


@dataclass(frozen=True)
class Check:
    """errors.<error>(kernel, the first entry of `array` where `bad` holds, *arguments) is
    raised before anything is written, on the calls where `when` holds."""

    array: str
    bad: str
    error: str
    arguments: tuple
    when: str = "True"


@dataclass(frozen=True)
class Indexed:
    """out = values[0] (or +=, when accumulate) where no case holds, else the first case's
    value; paired, the output's pair gets (values[0], values[1]). A case's condition
    reads positions and offsets, or columns and integers (decided once per column).

    `positions` are ((name, axis), ...) over the leading axes 0, 1, ...; `params` float
    scalars cast to the tile dtype, `offsets` integer ones (default 0) that cases and
    values read, `integers` ((name, default or None: required), ...) other integer
    keywords; `booleans` the inputs that are bool tiles; `layout` ((keyword, default),
    ...) the kernel takes but the formula needs not (mask_scalar's batch_ndim: its
    mask's ndim says it).
    """

    inputs: tuple
    output: str
    values: tuple
    accumulate: bool = False
    cases: tuple = ()  # ((condition on positions and offsets, value), ...)
    partners: tuple = ()
    positions: tuple = ()
    paired: bool = False
    params: tuple = ()
    offsets: tuple = ()
    booleans: tuple = ()
    layout: tuple = ()
    columns: tuple = ()
    scalars: tuple = ()
    integers: tuple = ()
    let: tuple = ()  # ((temp, text), ...)
    checks: tuple = ()

    def __post_init__(self):
        assert len(self.values) == (2 if self.paired else 1), self
        assert set(self.partners) <= set(self.inputs), "partners are inputs"
        assert not (self.partners and self.positions), "a partner or positions, not both"
        assert not self.columns or self.positions, "columns are the dims after positions"
        assert set(self.columns) | set(self.scalars) <= set(self.inputs), "inputs"
        assert tuple(axis for _, axis in self.positions) == tuple(range(len(self.positions)))
        known = {name for name, _ in self.positions} | set(self.offsets)
        known |= {name for name, _ in self.integers} | set(self.columns)
        for condition, _ in self.cases:
            assert names_in(condition) <= known, f"{condition}: positions and offsets only"
        assert not (self.cases and self.paired), "a pair's values have no cases"
        assert not (self.let and self.paired), "a pair's values have no temps"

    def __repr__(self):
        sign = "+=" if self.accumulate else "="
        return f"Indexed({self.output} {sign} {', '.join(self.values)})"

    def branches(self):
        """(condition or None, value) in the order they are tried (unpaired)."""
        return (*self.cases, (None, self.values[0]))


class AfterLogsumexp:
    """A FROM_LSE kernel of a table (or a formulas.PICKED_FROM_LSE one): the table's
    logsumexp of its logits along dim 0 into a tile of its own (`empty`), then the rule's
    entry (`rule`) on the logits and that lse, with the kernel's `keywords` ((name,
    default), ...). The table is read at the call (it is complete by then); `step` is
    the rule's entry, which the cpu loop's fallback calls."""

    def __init__(self, name, rule, table, empty, keywords=(("alpha", 1.0),)):
        self.__name__ = self.__qualname__ = name
        self.__doc__ = f"logsumexp, then {rule.__doc__}"
        self.step, self._table, self._empty = rule, table, empty
        self._keywords = dict(keywords)
        keyword = inspect.Parameter.KEYWORD_ONLY
        arrays = [parameter for parameter in inspect.signature(rule).parameters.values()
                  if parameter.kind is not keyword and parameter.name != "lse"]
        self.__signature__ = inspect.Signature(
            [*arrays, *(inspect.Parameter(key, keyword, default=default)
                        for key, default in keywords)])

    def __call__(self, logits, labels, *arrays, **keywords):
        unknown = keywords.keys() - self._keywords.keys()
        if unknown:
            raise TypeError(f"{self.__name__}: unknown keywords {', '.join(sorted(unknown))}")
        lse = self._empty(labels.shape, logits.dtype, order="F")
        self._table["logsumexp"](logits, lse, axis=0)
        self.step(logits, lse, labels, *arrays, **{**self._keywords, **keywords},
                  num_classes=logits.shape[0])


def indexed_signature(indexed):
    """The arrays positional (the inputs, then the output), then the params, the offsets
    (default 0), the integers and the layout keywords, keyword-only."""
    keyword = inspect.Parameter.KEYWORD_ONLY
    empty = inspect.Parameter.empty
    return inspect.Signature(
        [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD)
         for name in (*indexed.inputs, indexed.output)]
        + [inspect.Parameter(name, keyword) for name in indexed.params]
        + [inspect.Parameter(name, keyword, default=0) for name in indexed.offsets]
        + [inspect.Parameter(name, keyword, default=empty if default is None else default)
           for name, default in indexed.integers]
        + [inspect.Parameter(name, keyword, default=default)
           for name, default in indexed.layout])


def given_keywords(name, indexed, keywords):
    """(params, offsets and integers as ints) of a call, the layout keywords dropped; a
    missing or unknown one raises."""
    keywords = {key: value for key, value in keywords.items()
                if key not in dict(indexed.layout)}
    offsets = {key: int(keywords.pop(key, 0)) for key in indexed.offsets}
    for key, default in indexed.integers:
        if key not in keywords and default is None:
            raise TypeError(f"{name}: missing the keyword {key}")
        offsets[key] = int(keywords.pop(key, default))
    if keywords.keys() != set(indexed.params):
        raise TypeError(f"{name}: takes the parameters {', '.join(indexed.params) or 'none'}, "
                        f"got {', '.join(sorted(keywords)) or 'none'}")
    return keywords, offsets


def run_check(kernel, check, arrays, scope, evaluate):
    """Raise the check's error on its array's first bad entry (C order), where its `when`
    holds: a host sync. `evaluate(text, scope)` evaluates a text with the array module."""
    if not evaluate(check.when, scope):
        return
    array = arrays[check.array]
    bad = evaluate(check.bad, {**scope, check.array: array})
    if bool(bad.any()):
        raise getattr(errors, check.error)(kernel, array[bad].ravel()[0],
                                           *(scope[name] for name in check.arguments))


def pair_views(tile, size):
    """(first, second) of each pair of `tile` folded F-order to (2, size, rest): views of
    an F-contiguous tile in NumPy and CuPy alike."""
    folded = tile.reshape((2, size, -1), order="F")
    return folded[0], folded[1]


class ArrayIndexed(Evaluated):
    """An Indexed rule evaluated by array expressions (NumPy or CuPy), the formula's own
    text compiled once: positions are aranges along their axes, partners expanded to the
    tile's ndim (paired: folded to (P, 1) beside the (P, rest) pair views), and a case
    a `where` over the value it replaces."""

    signature = staticmethod(indexed_signature)

    def __call__(self, *arrays, **keywords):
        indexed, xp = self.rule, self._xp
        params, offsets = given_keywords(self.__name__, indexed, keywords)
        *inputs, out = arrays
        scope = {**params, **offsets}
        self.run_checks(inputs, scope)
        if indexed.paired:
            size = inputs[indexed.inputs.index(indexed.partners[0])].size
            for name, array in zip(indexed.inputs, inputs):
                if name in indexed.partners:
                    scope[name] = array.reshape((size, 1), order="F")
                else:
                    scope[f"{name}0"], scope[f"{name}1"] = pair_views(array, size)
            news = [self._eval(text, scope) for text in indexed.values]
            for view, new in zip(pair_views(out, size), news):
                self._store(view, new)
            return
        for name, array in zip(indexed.inputs, inputs):
            scope[name] = (array.reshape(array.shape + (1,) * (out.ndim - array.ndim))
                           if name in indexed.partners else array)
        for name, axis in indexed.positions:
            scope[name] = xp.arange(out.shape[axis]).reshape((-1,) + (1,) * (out.ndim - axis - 1))
        for temp, text in indexed.let:   # columns and scalars broadcast as they are
            scope[temp] = self._eval(text, scope)
        value = self._eval(indexed.values[0], scope)
        for condition, case in reversed(indexed.cases):
            value = xp.where(self._eval(condition, scope), self._eval(case, scope), value)
        self._store(out, value)

    def run_checks(self, inputs, scope):
        """Raise on the rule's first failing check, before anything is written: the
        compiled loss entries (compiled_indexed.CompiledLoss) call it before their launch."""
        for check in self.rule.checks:
            run_check(self.__name__, check, dict(zip(self.rule.inputs, inputs)), scope,
                      self._eval)

    def _store(self, out, value):
        if self.rule.accumulate:
            out += value
        else:
            out[...] = value
