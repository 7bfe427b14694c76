"""The rotary position embedding's formulas: rope and its backward (Indexed rules on the
pairs of adjacent elements) and scale_slice, elementwise.py's scale with its x a slice."""

from ..rules_broadcast import Broadcast, renamed_rule
from ..rules_indexed import Indexed
from . import elementwise

INDEXED = {
    # src [head_dim, rest..., broadcast...], sin and cos [head_dim/2, rest...]: the pair
    # (src[2i], src[2i+1]) rotated by the angle of sin[i], cos[i]
    "rope": Indexed(("sin", "cos", "src"), "dst",
                    ("cos * src0 - sin * src1", "sin * src0 + cos * src1"),
                    partners=("sin", "cos"), paired=True),
    # the transposed rotation (the inverse) of dy, accumulated into dx
    "rope_backward": Indexed(("sin", "cos", "dy"), "dx",
                             ("cos * dy0 + sin * dy1", "cos * dy1 - sin * dy0"),
                             accumulate=True, partners=("sin", "cos"), paired=True),
}

BROADCAST = {
    # scale with its x a slice (rope's scale_slice: alpha has no default, before axis)
    "scale_slice": Broadcast(renamed_rule(elementwise.ELEMENTWISE["scale"],
                                           {"x": "src", "y": "dst"}),
                             ("src",), "slice", params_first=True),
}
