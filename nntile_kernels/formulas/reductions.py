"""The reductions family's formulas: the sums, products, extrema and norms along an axis
or of a whole tile (REDUCTIONS), the softmax family (EXP_REDUCTIONS), the broadcast ops
that are their backwards or apply their results along an axis (BROADCAST: add_slice,
multiply_fiber, softmax_from_logsumexp, norm_slice_backward, ...) and the elementwise
merges of their partial results that the plan calls (ELEMENTWISE: maximum, minimum,
logsumexp_merge).

Several are elementwise.py's formulas with an operand broadcast: add_slice is add with
its first operand a slice.
"""

from dataclasses import replace

from ..rules import LOG_ADD_EXP, Rule
from ..rules_broadcast import Broadcast, renamed_rule
from ..rules_reduce import Reduction
from ..rules_softmax import ExpReduction
from . import elementwise

_ADD, _MULTIPLY, _SCALE = (elementwise.ELEMENTWISE[name] for name in ("add", "multiply", "scale"))

ELEMENTWISE = {
    # merge max_slice's / min_slice's partials; y is not read when beta == 0
    "maximum": Rule(("x", "y"), "z", "maximum(alpha * x, beta * y)", params=("alpha", "beta"),
                    defaults=(("alpha", 1.0), ("beta", 1.0)),
                    cases=(("beta == 0.0", "alpha * x"),)),
    "minimum": Rule(("x", "y"), "z", "minimum(alpha * x, beta * y)", params=("alpha", "beta"),
                    defaults=(("alpha", 1.0), ("beta", 1.0)),
                    cases=(("beta == 0.0", "alpha * x"),)),
    # the plan's merge of two partial logsumexps, z = log(alpha * exp(x) + beta * exp(y))
    # (called like add; y is not read when beta == 0); alpha, beta >= 0, log(0.0) = -inf
    "logsumexp_merge": Rule(
        ("x", "y"), "z", LOG_ADD_EXP[1],
        let=(("log_alpha", "log(alpha)"), ("log_beta", "log(beta)"), ("a", "x + log_alpha"),
             ("b", "y + log_beta"), *LOG_ADD_EXP[0]),
        params=("alpha", "beta"), defaults=(("alpha", 1.0), ("beta", 1.0)),
        cases=(("beta == 0.0", "x + log_alpha"),)),
}

REDUCTIONS = {
    "sum_slice": Reduction(("x",), "s", "x", "slice"),
    # LayerNorm's and the softmax backward's dot along an axis (sumprod_slice(x, x) a
    # sum of squares)
    "sumprod_slice": Reduction(("x", "y"), "z", "x * y", "slice"),
    "sum_fiber": Reduction(("x",), "y", "x", "fiber"),
    "sumprod_fiber": Reduction(("x", "y"), "f", "x * y", "fiber"),
    # the max pooling of a tiled axis: the partial maxima of its tiles merge with beta = 1
    "max_slice": Reduction(("x",), "y", "x", "slice", "maximum"),
    "min_slice": Reduction(("x",), "y", "x", "slice", "minimum"),
    # the 2-norms of clipping and of RMSNorm; partial norms of a tiled axis merge by the
    # same hypot (NNTile's norm_slice_inplace, norm_fiber_inplace)
    "norm_slice": Reduction(("x",), "y", "x * x", "slice", widen=True,
                            finish="fabs(alpha) * sqrt(total)", merge="hypot(value, beta * y)"),
    "norm_fiber": Reduction(("x",), "y", "x * x", "fiber", widen=True,
                            finish="fabs(alpha) * sqrt(total)", merge="hypot(value, beta * y)"),
    # how many entries share the extremum y of their slice, so that its gradient is split
    # among them (a count: exact in the float64 total)
    "extremum_count": Reduction(("x", "y"), "count", "x == y", "slice", "count",
                                partners=("y",)),
    # the whole tile to a 0-d output: a sum (sum_backward is its broadcast backward)
    "sum": Reduction(("x",), "y", "x", "whole"),
}

EXP_REDUCTIONS = {
    "softmax": ExpReduction("y", "tile", ("e / total",)),
    # log(total) is only taken where top is finite (total >= 1 there): no log(0.0)
    "logsumexp": ExpReduction(
        "y", "slice", ("where(isfinite(top), shift + log(where(isfinite(top), total, 1.0)), top)",),
        merge=LOG_ADD_EXP[1],
        merge_let=(("a", "value"), ("b", "y + log(beta)"), *LOG_ADD_EXP[0])),
    # flash attention's running pair: the maximum and the sum of exp(x - maximum)
    "maxsumexp": ExpReduction("y", "slice", ("top", "total")),
}

# add, multiply and scale with their first operand broadcast (NNTile's argument order:
# the slice first); add_slice's beta defaults to 1, and x is not read when beta == 0
_ADD_SLICE = renamed_rule(_ADD, {"x": "s", "y": "x"}, defaults=(("alpha", 1.0), ("beta", 1.0)))
_MULTIPLY_SLICE = renamed_rule(_MULTIPLY, {"x": "s", "y": "x"})
_MULTIPLY_FIBER = renamed_rule(_MULTIPLY, {"x": "f", "y": "x"})

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
    "add_fiber": Broadcast(replace(_ADD, defaults=(("alpha", 1.0), ("beta", 0.0))),
                           ("x",), "fiber"),
    "multiply_fiber": Broadcast(_MULTIPLY_FIBER, ("f",), "fiber"),
    # the backward of sumprod_fiber: multiply_fiber accumulated into dx
    "sumprod_fiber_backward": Broadcast(replace(_MULTIPLY_FIBER, output="dx", accumulate=True),
                                        ("f",), "fiber"),
    # the backward of sum: the 0-d dy added to every element of x (y = x = dx in place)
    "sum_backward": Broadcast(Rule(("dy", "x"), "y", "x + alpha * dy", params=("alpha",),
                                   defaults=(("alpha", 1.0),)), ("dy",), "scalar"),
    "scale_fiber": Broadcast(renamed_rule(_SCALE, {"x": "f"}, defaults=(("alpha", 1.0),)),
                             ("f",), "fiber"),
    "norm_fiber_backward": Broadcast(_NORM_BACKWARD, ("y", "dy"), "fiber"),
    # the same with y and dy a slice
    "norm_slice_backward": Broadcast(_NORM_BACKWARD, ("y", "dy"), "slice"),
    # the backward of max_slice, min_slice: the entries equal to their slice's extremum y
    # share its gradient dy equally (count = extremum_count), whatever the axis's tiling
    "extremum_backward": Broadcast(
        Rule(("x", "y", "count", "dy"), "dx", "where(x == y, share, 0.0)", accumulate=True,
             let=(("share", "dy / count"),)), ("y", "count", "dy"), "slice"),
}
