"""Rules that pick one element of each column by an index the column holds: the loss of a
class tile (cross_entropy_lse), written once in the language of rules.py: this is their
kind, its signature and evaluation; the formulas are formulas/losses.py's.

A `Picked` rule sums a term over the columns of a tile (its dims after dim 0: one per
token), in float64, into a 0-d output. The term reads the columns of the other inputs
(lse, the label) and `picked`: the tile's element at position `pick` of its column,
`pick` an integer expression of the columns (`labels - class_offset`), or 0.0 where it
falls outside the tile (another class tile holds it). `value` finishes the total (the
mean over the kept labels: `total / count`), stored as is where beta == 0, else plus
beta * out. A whole-tile reduction (rules_reduce.py) would test every element for the
one it wants; a pick reads one per column, as the hand-written loops did.

ArrayPicked evaluates the text with NumPy or CuPy (generic.py binds it):
take_along_axis at the clipped pick, then a `where`; generate_cpu_picked.py writes
the numba loops (cpu_rules_picked.py). The label checks are rules_indexed.Checks.
cross_entropy (PICKED_FROM_LSE) is such a rule run after the table's logsumexp.
No C++ yet: the cuda table evaluates the text with CuPy.

Imports rules_indexed.py (and through it rules.py and errors.py); NumPy only at a call,
for errstate, which CuPy arrays ignore.
"""

import inspect
from dataclasses import dataclass

from .rules import Evaluated
from .rules_indexed import run_check


@dataclass(frozen=True)
class Picked:
    """out = value(total) [+ beta * out], total = sum over the columns of `term`.

    `inputs` are the tile, then its columns (`ids` among them integer: never widened) and
    the 0-d `scalars`; the float columns and `picked` are widened to float64 in `term`.
    `offsets` and `integers` are integer keywords as in rules_indexed.Indexed; a kernel
    takes `beta` (default 0) last."""

    inputs: tuple
    output: str
    pick: str
    term: str
    value: str
    ids: tuple = ()
    scalars: tuple = ()
    params: tuple = ()  # float keywords `value` reads, in float64
    offsets: tuple = ()
    integers: tuple = ()
    checks: tuple = ()

    @property
    def tile(self):
        return self.inputs[0]

    @property
    def columns(self):
        return tuple(name for name in self.inputs[1:] if name not in self.scalars)


# the keywords of a PICKED_FROM_LSE kernel (formulas/losses.py), run by AfterLogsumexp
PICKED_KEYWORDS = (("alpha", 1.0), ("beta", 0.0))


def picked_signature(picked):
    """The arrays positional (the inputs, then the output), then the offsets (default 0),
    the integers, the params and beta=0.0, keyword-only."""
    keyword, empty = inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.empty
    return inspect.Signature(
        [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD)
         for name in (*picked.inputs, picked.output)]
        + [inspect.Parameter(name, keyword, default=0) for name in picked.offsets]
        + [inspect.Parameter(name, keyword, default=empty if default is None else default)
           for name, default in picked.integers]
        + [inspect.Parameter(name, keyword) for name in picked.params]
        + [inspect.Parameter("beta", keyword, default=0.0)])


class ArrayPicked(Evaluated):
    """A Picked rule evaluated by array expressions (NumPy or CuPy): the pick a
    take_along_axis at the clipped position, the term over the columns widened to
    float64, summed."""

    signature = staticmethod(picked_signature)

    def __init__(self, name, picked, namespace):
        super().__init__(name, picked, namespace)
        self.__doc__ = f"{picked.output} = {picked.value}, total = sum({picked.term})"

    def __call__(self, *arrays, beta=0.0, **keywords):
        import numpy as np   # at the call: the formulas import this module, and stay pure text
        picked, xp = self.rule, self._xp
        bound = self.__signature__.bind(*arrays, beta=beta, **keywords)
        bound.apply_defaults()
        scope = {name: int(bound.arguments[name])
                 for name in (*picked.offsets, *(name for name, _ in picked.integers))}
        params = {name: float(bound.arguments[name]) for name in picked.params}
        *inputs, out = arrays
        named = dict(zip(picked.inputs, inputs))
        for check in picked.checks:
            run_check(self.__name__, check, named, scope, self._eval)
        tile = named[picked.tile]
        # 0-d arrays, so that where() of a condition on them alone is where() of an array
        scope = {name: xp.asarray(number) for name, number in scope.items()}
        for name in picked.columns:
            scope[name] = named[name] if name in picked.ids else named[name].astype(xp.float64)
        scope.update({name: named[name] for name in picked.scalars}, **params)
        local = self._eval(picked.pick, scope)
        hit = (local >= 0) & (local < tile.shape[0])
        at = xp.where(hit, local, 0)[None]
        scope["picked"] = xp.where(hit, xp.take_along_axis(tile, at, axis=0)[0], 0.0).astype(
            xp.float64)
        scope["total"] = self._eval(picked.term, scope).sum(dtype=xp.float64)
        with np.errstate(invalid="ignore", divide="ignore"):   # count 0: all ignored, nan
            value = self._eval(picked.value, scope)
        out[...] = value if beta == 0.0 else value + beta * out

