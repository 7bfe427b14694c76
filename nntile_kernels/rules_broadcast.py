"""Elementwise rules with operands that broadcast along an axis: the slice ops (add_slice,
multiply_slice, softmax_from_logsumexp, ...) and fiber ops (add_fiber, multiply_fiber,
scale_fiber, norm_fiber_backward, ...): their kind, signature and array evaluation. Each
is written once as a formula of rules.py's language, in formulas/ (reductions.py:
add_slice, softmax_from_logsumexp, ...; losses.py: mse_backward; rope.py: scale_slice).

A `Broadcast` is a Rule whose `partners` are not full tiles: of shape "slice" a partner
is a full tile without `axis` (x's shape with that dim removed: a row sum, a
logsumexp); of shape "fiber" it has only `axis` and the trailing `batch_ndim` dims (a
norm per channel); of shape "scalar" it is 0-d, broadcast over the whole tile
(sum_backward's dy, mse_backward's dloss). The kernel takes `axis` (and, for fibers,
`batch_ndim`) before the rule's params, a scalar's none. ArrayBroadcast evaluates the
formula with NumPy or CuPy on the partners expanded to the tiles' ndim (generic.py
binds it), and generate_cpu_broadcast.py writes the numba loops over the folded views
the reductions use (cpu_rules_broadcast.py; a 0-d partner's over the flat tile,
cpu_rules_broadcast_scalar.py), so the reference and the loop read one text.

Pure Python, imports rules.py and rules_numba.py only.
"""

import inspect
from dataclasses import dataclass, replace

from .rules import FLOAT_LITERAL, ArrayRule, Rule, renamed, rule_signature
from .rules_numba import literal_name, spelled_out

SHAPES = ("slice", "fiber", "scalar")


@dataclass(frozen=True)
class Broadcast:
    """`rule` with the inputs named in `partners` broadcast along `shape`'s dims;
    `params_first` puts the params before `axis` in the signature (scale_slice's order)."""

    rule: Rule
    partners: tuple
    shape: str
    params_first: bool = False

    def __post_init__(self):
        assert self.shape in SHAPES, self.shape
        assert set(self.partners) <= set(self.rule.inputs), "partners are inputs"

    def __repr__(self):
        return f"Broadcast({self.rule!r} with {', '.join(self.partners)} a {self.shape})"


def renamed_rule(rule, names, **changes):
    """`rule` with its arrays renamed by `names` (one pass: a swap stays a swap)."""
    def text(value):
        return renamed(value, names)
    return replace(rule, inputs=tuple(names.get(a, a) for a in rule.inputs),
                   output=names.get(rule.output, rule.output), value=text(rule.value),
                   let=tuple((t, text(v)) for t, v in rule.let),
                   cases=tuple((c, text(v)) for c, v in rule.cases), **changes)


def broadcast_signature(broadcast):
    """The rule's signature with `axis` (and a fiber's `batch_ndim=0`) before its params
    (after them when `params_first`); a scalar's has no axis."""
    signature = rule_signature(broadcast.rule)
    arrays = [p for p in signature.parameters.values() if p.kind is p.POSITIONAL_OR_KEYWORD]
    params = [p for p in signature.parameters.values() if p.kind is p.KEYWORD_ONLY]
    axes = []
    if broadcast.shape != "scalar":
        axes.append(inspect.Parameter("axis", inspect.Parameter.KEYWORD_ONLY))
    if broadcast.shape == "fiber":
        axes.append(inspect.Parameter("batch_ndim", inspect.Parameter.KEYWORD_ONLY, default=0))
    keywords = [*params, *axes] if broadcast.params_first else [*axes, *params]
    return signature.replace(parameters=[*arrays, *keywords])


def broadcast_axes(broadcast, ndim, axis, batch_ndim):
    """The dims of a full tile of `ndim` dims that a partner lacks (a scalar's: all,
    which NumPy's broadcasting adds by itself)."""
    if broadcast.shape == "scalar":
        return ()
    if broadcast.shape == "slice":
        return (axis,)
    return tuple(dim for dim in range(ndim - batch_ndim) if dim != axis)


def broadcast_literals(broadcasts):
    """name -> value of the float literals the `broadcasts`' formulas use in numba."""
    texts = [text for b in broadcasts
             for text in (*(v for _, v in b.rule.let), *(v for _, v in b.rule.branches()))]
    return {literal_name(literal): float(literal)
            for text in texts for literal in FLOAT_LITERAL.findall(spelled_out(text))}


class ArrayBroadcast:
    """A Broadcast evaluated by array expressions (NumPy or CuPy): the partners expanded
    to the full tiles' ndim (views, no copy), then the rule's ArrayRule."""

    def __init__(self, name, broadcast, namespace):
        self.__name__ = self.__qualname__ = name
        self.__doc__ = repr(broadcast)
        self.broadcast = broadcast
        self.__signature__ = broadcast_signature(broadcast)
        self._rule = ArrayRule(name, broadcast.rule, namespace)
        self._xp = namespace["__xp__"]

    def __call__(self, *arrays, axis=None, **params):
        broadcast = self.broadcast
        batch_ndim = params.pop("batch_ndim", 0) if broadcast.shape == "fiber" else 0
        dims = broadcast_axes(broadcast, arrays[-1].ndim, axis, batch_ndim)
        names = (*broadcast.rule.inputs, broadcast.rule.output)
        self._rule(*(self._xp.expand_dims(array, dims) if name in broadcast.partners else array
                     for name, array in zip(names, arrays)), **params)
