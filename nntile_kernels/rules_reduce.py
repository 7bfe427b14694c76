"""Reductions along an axis written once (their kind, signature and evaluation here; the
formulas are formulas/reductions.py's, mse's and valid_count's formulas/losses.py's):
sum_slice, sumprod_slice, sum_fiber and sumprod_fiber, each a per-element term (a
formula of rules.py's language of the input tiles: `x`,
`x * y`) summed in float64 and stored as out = alpha * total + beta * out; max_slice
and min_slice, the term's maximum (minimum) merged as out = maximum(total, beta * out);
norm_slice and norm_fiber, the squares of x widened to float64 first (fp32 squares
overflow past 1.8e19; a product of two fp32 is exact in float64), their sum
finished as |alpha| * sqrt(total) and merged with the old norm as
hypot(value, beta * out); extremum_count, the int64 count of x == y, y a slice
partner (broadcast along the axis), stored as out = total + beta * out; and the
reductions of a whole tile to a 0-d output: sum, mse (the squares of x - y in
float64) and valid_count (the int64 count of labels != ignore_index, a param).

A `Reduction` of shape "slice" sums the term over `axis` (the output is the tile
without that dim: a row sum); of shape "fiber" over every dim but `axis` and the
trailing `batch_ndim` dims (the output has only those: a sum per channel); of shape
"whole" over every dim (the output is 0-d: a loss, a count). The store
never reads out when beta == 0 (it may be garbage, or NaN). A maximum or minimum is NaN
where a term is (NumPy's max, maximum). ArrayReduction evaluates
the term with NumPy or CuPy and sums it (generic.py binds it: the reference and the
cuda table), and generate_cpu_reduce.py writes the numba loops (cpu_rules_reduce.py),
so both read one text. The broadcast ops that are their backwards (add_slice,
sumprod_slice_backward, ...) are Broadcast rules (rules_broadcast.py).

Pure Python, imports rules.py and generic_common.py only (no numpy, numba or cupy).
"""

import inspect
from dataclasses import dataclass

from .generic_common import fiber_axes, store, wide
from .rules import FLOAT_LITERAL, FUNCTIONS, names_in

SHAPES = ("slice", "fiber", "whole")
# how terms combine: a float64 sum scaled by alpha, or NumPy's NaN-propagating maximum
# and minimum (no alpha: max_slice's and min_slice's signatures have none)
# and minimum (no alpha: max_slice's and min_slice's signatures have none), or an int64
# count of true terms (exact; one chain of integer adds vectorises, float64 ones do not)
COMBINES = ("sum", "maximum", "minimum", "count")


@dataclass(frozen=True)
class Reduction:
    """out = alpha * (float64 sum of `term` over `shape`'s dims) + beta * out, or
    out = maximum(max of `term`, beta * out) (minimum likewise) by `combine`.

    `term` names the `inputs` and `params` only (no literals): it is computed in the
    tile dtype (fp16 tiles in fp32, as the reference always did), then widened; with
    `widen`, on the inputs widened to float64 first. `params` are ((name, default),
    ...): keywords the term reads as given (valid_count's int ignore_index, compared
    with int64 labels: a float would widen every label). `finish` (of the combined `total`
    and `alpha`) is the value stored where beta == 0; `merge` (of that `value`, `beta`
    and the output's old contents, by its name) the one stored otherwise. By default a
    sum's are alpha * total and value + beta * out, an extremum's total and
    maximum(value, beta * out)."""

    inputs: tuple
    output: str
    term: str
    shape: str
    combine: str = "sum"
    widen: bool = False
    finish: str = None
    merge: str = None
    # inputs shaped as the output (a slice's), broadcast along the axis
    partners: tuple = ()
    params: tuple = ()

    def __post_init__(self):
        assert self.shape in SHAPES, self.shape
        assert self.combine in COMBINES, self.combine
        assert names_in(self.term) <= {*self.inputs, *dict(self.params)}, \
            f"{self.term}: the inputs and params only"
        assert not FLOAT_LITERAL.search(self.term), f"{self.term}: no literals"
        summed = self.combine == "sum"
        if self.finish is None:   # frozen: the defaults are set through object
            object.__setattr__(self, "finish", "alpha * total" if summed else "total")
        if self.merge is None:
            object.__setattr__(self, "merge", f"{self.combine}(value, beta * {self.output})"
                               if self.combine in ("maximum", "minimum")
                               else f"value + beta * {self.output}")
        # an extremum's signature has no alpha (max_slice's, min_slice's)
        given = {"total", "alpha"} if summed else {"total"}
        assert names_in(self.finish) - set(FUNCTIONS) <= given, self.finish
        assert set(self.partners) <= set(self.inputs[1:]), "a partner follows the tile"
        assert not self.partners or self.shape == "slice", "a slice's partners only"
        assert self.combine != "count" or self.shape != "fiber", "no fiber counts"
        assert not {"alpha", "beta", "axis", "batch_ndim"} & set(dict(self.params)), \
            "a param is named apart from the kernel's own keywords"
        assert names_in(self.merge) - set(FUNCTIONS) <= {"value", "beta", self.output}, \
            self.merge

    @property
    def takes_alpha(self):
        """Whether the kernel has an alpha: its finish reads one."""
        return "alpha" in names_in(self.finish)

    def __repr__(self):
        return f"Reduction({self.output} = {self.combine} of {self.term} over a {self.shape})"


def reduction_signature(reduction):
    """The arrays positional (the inputs, then the output), then `axis` (none for a
    whole tile), a fiber's `batch_ndim=0`, the params, `alpha=1.0` where the finish
    reads it and `beta=0.0`, keyword-only."""
    def keyword(name, *default):
        return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY,
                                 default=default[0] if default else inspect.Parameter.empty)
    arrays = [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD)
              for name in (*reduction.inputs, reduction.output)]
    axis = [] if reduction.shape == "whole" else [keyword("axis")]
    batch = [keyword("batch_ndim", 0)] if reduction.shape == "fiber" else []
    params = [keyword(name, default) for name, default in reduction.params]
    alpha = [keyword("alpha", 1.0)] if reduction.takes_alpha else []
    return inspect.Signature([*arrays, *axis, *batch, *params, *alpha, keyword("beta", 0.0)])


def reduced_axes(reduction, ndim, axis, batch_ndim):
    """The dims of a tile of `ndim` dims that the reduction sums over."""
    if reduction.shape == "whole":
        return tuple(range(ndim))
    return (axis,) if reduction.shape == "slice" else fiber_axes(ndim, axis, batch_ndim)


class ArrayReduction:
    """A Reduction evaluated by array expressions (NumPy or CuPy): the term on the
    inputs (fp16 widened to fp32; all to float64 with `widen`), its float64 sum (or its
    max, min) over the reduced dims, the finish and the merge."""

    def __init__(self, name, reduction, namespace):
        self.__name__ = self.__qualname__ = name
        self.__doc__ = repr(reduction)
        self.reduction = reduction
        self.__signature__ = reduction_signature(reduction)
        self._namespace = namespace
        self._term = compile(reduction.term, f"<{name}>", "eval")
        self._finish = compile(reduction.finish, f"<{name} finish>", "eval")
        self._merge = compile(reduction.merge, f"<{name} merge>", "eval")
        # a sum stored as alpha * total + beta * out takes generic_common.store: one fused
        # pass on a GPU instead of a pass per operator of the formulas
        self._plain_sum = reduction.combine == "sum" and (reduction.finish, reduction.merge) == (
            "alpha * total", f"value + beta * {reduction.output}")
        # the keywords beside axis, batch_ndim and beta, with their defaults
        self._keywords = {**dict(reduction.params),
                          **({"alpha": 1.0} if reduction.takes_alpha else {})}

    def __call__(self, *arrays, axis=None, batch_ndim=0, beta=0.0, **keywords):
        reduction, xp = self.reduction, self._namespace["__xp__"]
        unknown = keywords.keys() - self._keywords.keys()
        if (batch_ndim and reduction.shape != "fiber" or unknown
                or (axis is None) != (reduction.shape == "whole")):
            raise TypeError(f"{self.__name__}: takes {self.__signature__}, not "
                            f"{', '.join(sorted(unknown)) or 'batch_ndim or axis'}")
        given = {**self._keywords, **keywords}
        alpha = given.pop("alpha", 1.0)
        *inputs, out = arrays
        scope = {name: array.astype(xp.float64 if reduction.widen else wide(xp, array.dtype),
                                    copy=False)
                 for name, array in zip(reduction.inputs, inputs)}
        scope.update(given)   # the params, as given
        for name in reduction.partners:   # a slice, broadcast along the axis
            broadcast = (*inputs[0].shape[:axis], 1, *inputs[0].shape[axis + 1:])
            scope[name] = scope[name].reshape(broadcast, order="F")
        term = eval(self._term, self._namespace, scope)
        axes = reduced_axes(reduction, inputs[0].ndim, axis, batch_ndim)
        if reduction.combine == "sum":
            total = term.sum(axis=axes, dtype=xp.float64)
            if self._plain_sum:
                store(out, total, beta, out, alpha)
                return
        elif reduction.combine == "count":
            total = term.sum(axis=axes)
        elif reduction.combine == "maximum":
            total = term.max(axis=axes)
        else:
            total = term.min(axis=axes)
        value = eval(self._finish, self._namespace, {"total": total, "alpha": alpha})
        out[...] = value if beta == 0.0 else eval(
            self._merge, self._namespace, {"value": value, "beta": beta, reduction.output: out})
