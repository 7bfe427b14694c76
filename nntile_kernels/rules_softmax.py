"""The softmax family written once (their kind, signature and evaluation here, the
formulas in formulas/reductions.py): softmax, logsumexp and maxsumexp each reduce the
slices of a tile x along `axis` to their maximum `top`, the `shift` (top where
finite, else 0.0: no inf - inf, so a slice of all -inf sums to 0, never NaN) and the
float64 `total` of the terms e = exp(x - shift), each e computed in the tile dtype
(fp32 tiles take cpu_fastmath.fast_exp's vectorised fp32 path in the numba loops, fp16
tiles fp32), and then store a formula of them:

- a slice store (logsumexp): out (the tile without `axis`) = the value, merged with
  the old out where beta != 0 (rules.LOG_ADD_EXP: the partial results of an axis split
  over tiles); several values stack along a leading dim of out (maxsumexp's pair:
  out[0] = top, out[1] = total);
- a tile store (softmax): out (x's shape) = a formula of e and the slice's values,
  a broadcast store over the tile the reduction read; out may be x itself.

The maximum is NaN where an entry is (NumPy's max), and so is everything after it.
ArrayExpReduction evaluates the texts with NumPy or CuPy (generic.py binds it: the
reference and the cuda table); generate_cpu_softmax.py writes the numba loops
(cpu_rules_softmax.py) from the same texts. logsumexp_merge, the merge of two partial
logsumexps, is an elementwise rule of formulas/reductions.py.

Pure Python, imports rules.py and generic_common.py only (no numpy, numba or cupy).
"""

import inspect
from dataclasses import dataclass

from .generic_common import wide
from .rules import FUNCTIONS, Evaluated, names_in

# the reduction every store reads: the shift of the maximum, then the summed term
SHIFT = "where(isfinite(top), top, 0.0)"
TERM = "exp(x - shift)"
STORES = ("slice", "tile")
SLICE_NAMES = {"top", "shift", "total"}


@dataclass(frozen=True)
class ExpReduction:
    """out = `values` of the slices' top, shift and total (a "slice" store; several
    values stack along a leading dim), or of those and the term `e` (a "tile" store,
    out shaped as x). A slice store with a `merge` (of `value`, `beta` and the old out,
    by its name, after the `merge_let` temps) takes beta: where beta != 0 it stores the
    merge of the value with the old out, which it never reads where beta == 0."""

    output: str
    store: str
    values: tuple
    merge: str = None
    merge_let: tuple = ()

    def __post_init__(self):
        assert self.store in STORES, self.store
        given = SLICE_NAMES | ({"e"} if self.store == "tile" else set())
        for value in self.values:
            assert names_in(value) - set(FUNCTIONS) <= given, value
        assert self.store == "slice" or len(self.values) == 1, "a tile store has one value"
        assert self.merge is None or len(self.values) == 1, "a merge of one value"
        temps = {temp for temp, _ in self.merge_let}
        for text in (*(text for _, text in self.merge_let), self.merge or "value"):
            assert names_in(text) - set(FUNCTIONS) <= {"value", "beta", self.output, *temps}, text

    @property
    def takes_beta(self):
        """Whether the kernel has a beta: a merge reads one."""
        return self.merge is not None

    def __repr__(self):
        return f"ExpReduction({self.output} = {', '.join(self.values)} over a slice)"


def exp_reduction_signature(reduction):
    """(x, out, *, axis), and `beta=0.0` where the store merges."""
    arrays = [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD)
              for name in ("x", reduction.output)]
    keywords = [inspect.Parameter("axis", inspect.Parameter.KEYWORD_ONLY)]
    if reduction.takes_beta:
        keywords.append(inspect.Parameter("beta", inspect.Parameter.KEYWORD_ONLY, default=0.0))
    return inspect.Signature([*arrays, *keywords])


class ArrayExpReduction(Evaluated):
    """An ExpReduction evaluated by array expressions (NumPy or CuPy): the maximum along
    the axis, the shift, the term in the tile dtype (fp16 in fp32), its float64 sum,
    then the store."""

    signature = staticmethod(exp_reduction_signature)

    def __call__(self, x, out, *, axis, **beta):
        reduction, xp = self.rule, self._xp
        if beta.keys() - ({"beta"} if reduction.takes_beta else set()):
            raise TypeError(f"{self.__name__}: takes no {', '.join(sorted(beta))}: "
                            f"{self.__signature__}")
        beta = beta.get("beta", 0.0)
        x = x.astype(wide(xp, x.dtype), copy=False)
        scope = {"top": x.max(axis=axis, keepdims=True)}
        scope["shift"] = self._eval(SHIFT, scope)
        scope["e"] = self._eval(TERM, {"x": x, "shift": scope["shift"]})
        scope["total"] = scope["e"].sum(axis=axis, dtype=xp.float64, keepdims=True)
        if reduction.store == "tile":
            out[...] = self._eval(reduction.values[0], scope)
            return
        del scope["e"]
        scope = {name: xp.squeeze(array, axis=axis) for name, array in scope.items()}
        values = [self._eval(value, scope) for value in reduction.values]
        if len(values) > 1:   # stacked along out's leading dim
            for index, value in enumerate(values):
                out[index] = value
            return
        if beta == 0.0:
            out[...] = values[0]
            return
        merged = {"value": values[0], "beta": beta, reduction.output: out}
        for temp, text in reduction.merge_let:
            merged[temp] = self._eval(text, merged)
        out[...] = self._eval(reduction.merge, merged)
