"""Elementwise rules with operands that broadcast along an axis: the slice ops (add_slice,
multiply_slice, softmax_from_logsumexp, ...) and fiber ops (add_fiber, multiply_fiber,
scale_fiber, norm_fiber_backward, ...), each written once as a rules.py formula.

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

from .rules import ELEMENTWISE, FLOAT_LITERAL, ArrayRule, Rule, renamed, rule_signature
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


def _renamed_rule(rule, names, **changes):
    """`rule` with its arrays renamed by `names` (one pass: a swap stays a swap)."""
    def text(value):
        return renamed(value, names)
    return replace(rule, inputs=tuple(names.get(a, a) for a in rule.inputs),
                   output=names.get(rule.output, rule.output), value=text(rule.value),
                   let=tuple((t, text(v)) for t, v in rule.let),
                   cases=tuple((c, text(v)) for c, v in rule.cases), **changes)


# add, multiply and scale with their first operand broadcast (NNTile's argument order:
# the slice first); add_slice's beta defaults to 1, and x is not read when beta == 0
_ADD_SLICE = _renamed_rule(ELEMENTWISE["add"], {"x": "s", "y": "x"},
                           defaults=(("alpha", 1.0), ("beta", 1.0)))
_MULTIPLY_SLICE = _renamed_rule(ELEMENTWISE["multiply"], {"x": "s", "y": "x"})
_MULTIPLY_FIBER = _renamed_rule(ELEMENTWISE["multiply"], {"x": "f", "y": "x"})

# dx += alpha^2 * dy / y * x, y = |alpha| * the norm of x (hypot_backward's formula with
# the factor alpha^2 * dy / y first: a loop over the tile's run hoists it, one division
# per y entry as the hand-written loops did, and fp64 tiles get their results bitwise);
# 0 where y == 0 (x is 0 along that fiber or slice)
_NORM_BACKWARD = Rule(("x", "y", "dy"), "dx",
                      "where(y == 0.0, 0.0, alpha * alpha * dy / safe * x)", accumulate=True,
                      let=(("safe", "where(y == 0.0, 1.0, y)"),), params=("alpha",),
                      defaults=(("alpha", 1.0),))

BROADCAST = {
    "add_slice": Broadcast(_ADD_SLICE, ("s",), "slice"),
    "multiply_slice": Broadcast(_MULTIPLY_SLICE, ("s",), "slice"),
    # the backward of sumprod_slice: multiply_slice accumulated into dx
    "sumprod_slice_backward": Broadcast(replace(_MULTIPLY_SLICE, output="dx", accumulate=True),
                                        ("s",), "slice"),
    # y = logsumexp(x): a slice of all -inf has y = -inf and gets exp(-inf - 0) = 0, no nan
    "logsumexp_backward": Broadcast(
        Rule(("x", "y", "dy"), "dx", "exp(x - shift) * dy", accumulate=True,
             let=(("shift", "where(isfinite(y), y, 0.0)"),)), ("y", "dy"), "slice"),
    # the softmax when lse = logsumexp(x); a -inf score gives 0
    "softmax_from_logsumexp": Broadcast(Rule(("lse", "x"), "y", "exp(x - lse)"),
                                        ("lse",), "slice"),
    # d = sumprod_slice(y, dy)
    "softmax_from_logsumexp_backward": Broadcast(
        Rule(("y", "dy", "d"), "dx", "y * (dy - d)", accumulate=True), ("d",), "slice"),
    # add with its x a fiber (a bias; beta defaults to 0: y is not read)
    "add_fiber": Broadcast(replace(ELEMENTWISE["add"], defaults=(("alpha", 1.0), ("beta", 0.0))),
                           ("x",), "fiber"),
    "multiply_fiber": Broadcast(_MULTIPLY_FIBER, ("f",), "fiber"),
    # the backward of sumprod_fiber: multiply_fiber accumulated into dx
    "sumprod_fiber_backward": Broadcast(replace(_MULTIPLY_FIBER, output="dx", accumulate=True),
                                        ("f",), "fiber"),
    # scale with its x a slice (rope's scale_slice: alpha has no default, before axis)
    "scale_slice": Broadcast(_renamed_rule(ELEMENTWISE["scale"], {"x": "src", "y": "dst"}),
                             ("src",), "slice", params_first=True),
    # the backward of sum: the 0-d dy added to every element of x (y = x = dx in place)
    "sum_backward": Broadcast(Rule(("dy", "x"), "y", "x + alpha * dy", params=("alpha",),
                                   defaults=(("alpha", 1.0),)), ("dy",), "scalar"),
    # the backward of mse (loss = alpha * sum((x - y)^2)) with the 0-d dloss; the factor
    # first, one product per call
    "mse_backward": Broadcast(Rule(("x", "y", "dloss"), "dx", "2.0 * alpha * dloss * (x - y)",
                                   accumulate=True, params=("alpha",),
                                   defaults=(("alpha", 1.0),)), ("dloss",), "scalar"),
    "scale_fiber": Broadcast(_renamed_rule(ELEMENTWISE["scale"], {"x": "f"},
                                           defaults=(("alpha", 1.0),)), ("f",), "fiber"),
    "norm_fiber_backward": Broadcast(_NORM_BACKWARD, ("y", "dy"), "fiber"),
    # the same with y and dy a slice
    "norm_slice_backward": Broadcast(_NORM_BACKWARD, ("y", "dy"), "slice"),
    # the backward of max_slice, min_slice: the entries equal to their slice's extremum y
    # share its gradient dy equally (count = extremum_count), whatever the axis's tiling
    "extremum_backward": Broadcast(
        Rule(("x", "y", "count", "dy"), "dx", "where(x == y, share, 0.0)", accumulate=True,
             let=(("share", "dy / count"),)), ("y", "count", "dy"), "slice"),
}


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


def broadcast_literals():
    """name -> value of the float literals the broadcast rules' formulas use in numba."""
    texts = [text for b in BROADCAST.values()
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
