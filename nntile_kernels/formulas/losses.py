"""The losses' formulas: the squared error (mse, a whole-tile reduction, and its
broadcast backward), the count of the labels kept (valid_count) and the cross-entropy
of the class tiles: its loss picks one logit per column (PICKED: rules_picked.py's
language), its backward is an indexed rule (LOSSES: rules_indexed.py's), and the
kernels that run after the table's logsumexp (FROM_LSE, PICKED_FROM_LSE:
rules_indexed.AfterLogsumexp) the whole class axis in one tile."""

from ..rules import Rule
from ..rules_broadcast import Broadcast
from ..rules_indexed import Check, Indexed
from ..rules_picked import Picked
from ..rules_reduce import Reduction

REDUCTIONS = {
    # the squared error of a tile pair, squared in float64 as the reference always did
    "mse": Reduction(("x", "y"), "loss", "(x - y) * (x - y)", "whole", widen=True),
    # how many labels are not ignored (the cross-entropy's divisor)
    "valid_count": Reduction(("labels",), "count", "labels != ignore_index", "whole", "count",
                             params=(("ignore_index", -100),)),
}

BROADCAST = {
    # the backward of mse (loss = alpha * sum((x - y)^2)) with the 0-d dloss; the factor
    # first, one product per call
    "mse_backward": Broadcast(Rule(("x", "y", "dloss"), "dx", "2.0 * alpha * dloss * (x - y)",
                                   accumulate=True, params=("alpha",),
                                   defaults=(("alpha", 1.0),)), ("dloss",), "scalar"),
}

# the labels of a class tile: checked by class tile 0 only, which every position meets
# exactly once
LABELS = Check("labels", "(labels != ignore_index) & ((labels < 0) | (labels >= num_classes))",
               "label_error", ("num_classes", "ignore_index"), when="class_offset == 0")
# the labels when the whole class axis is one tile: no ignore_index
_ALL_LABELS = Check("labels", "(labels < 0) | (labels >= num_classes)", "label_error",
                    ("num_classes",))

LOSSES = {
    # logits [classes, positions...] of the class tile from class_offset, lse and labels
    # per position, the 0-d dloss and count (of the labels kept): dlogits += dloss / count
    # * (softmax - onehot) where the label is not ignore_index (a count of 0 keeps none;
    # an ignored column adds 0, whatever its logits)
    "cross_entropy_lse_backward": Indexed(
        ("logits", "lse", "labels", "count", "dloss"), "dlogits",
        ("scale * where(cls == labels - class_offset, prob - 1.0, prob)",), accumulate=True,
        cases=(("labels == ignore_index", "0.0"),),
        let=(("scale", "dloss / where(count == 0.0, 1.0, count)"),
             ("prob", "exp(logits - lse)")),
        positions=(("cls", 0),), columns=("lse", "labels"), scalars=("count", "dloss"),
        offsets=("class_offset",), integers=(("ignore_index", -100), ("num_classes", None)),
        checks=(LABELS,)),
}

# kernel -> the rule it runs on its logits and their logsumexp along the classes (dim 0),
# which the table's logsumexp computes first (AfterLogsumexp): the whole class axis in
# one tile, no ignore_index
FROM_LSE = {
    # dlogits += alpha * dloss * (softmax - onehot); every label in [0, classes)
    "cross_entropy_backward": Indexed(
        ("logits", "lse", "labels", "dloss"), "dlogits",
        ("scale * where(cls == labels, prob - 1.0, prob)",), accumulate=True,
        let=(("scale", "alpha * dloss"), ("prob", "exp(logits - lse)")),
        positions=(("cls", 0),), columns=("lse", "labels"), scalars=("dloss",),
        params=("alpha",), integers=(("num_classes", None),), checks=(_ALL_LABELS,)),
}

PICKED = {
    # logits [classes, positions...] of the class tile from class_offset, lse and labels
    # per position, count (of the labels kept): the mean over the kept labels of lse -
    # logits[label]; class tile 0 adds the lse terms, each tile subtracts the logits of
    # the labels it holds (a count of 0 gives nan)
    "cross_entropy_lse": Picked(
        ("logits", "lse", "labels", "count"), "loss", pick="labels - class_offset",
        term="where(labels == ignore_index, 0.0, where(class_offset == 0, lse, 0.0) - picked)",
        value="total / count", ids=("labels",), scalars=("count",), offsets=("class_offset",),
        integers=(("ignore_index", -100), ("num_classes", None)), checks=(LABELS,)),
}

# kernel -> the rule it runs on its logits and their logsumexp along the classes
# (rules_indexed.AfterLogsumexp, with rules_picked.PICKED_KEYWORDS): the whole class
# axis in one tile
PICKED_FROM_LSE = {
    # loss = alpha * sum(lse - logits[label]) (+ beta * loss); every label in [0, classes)
    "cross_entropy": Picked(
        ("logits", "lse", "labels"), "loss", pick="labels", term="lse - picked",
        value="alpha * total", ids=("labels",), params=("alpha",),
        integers=(("num_classes", None),), checks=(_ALL_LABELS,)),
}
