"""Graph layer: rules of the cross-entropy ops with ignore_index and a split vocabulary.

cross_entropy = logsumexp over the class axis (split: merged by logaddexp), valid_count
(how many labels are not ignore_index) and cross_entropy_lse, a sum over class and batch
tiles whose partial results are added: every op lets the class axis be split over tiles
and ranks (vocab-parallel, as Megatron does). Labels are checked when the kernels run.
"""

from .backward_loss import cross_entropy_lse_rule
from .dtypes import FLOAT_DTYPES
from .registry import OpSpec, always, labels, op_error, register
from .rules_common import (numel, require_float, require_ignore_index, require_int,
                           require_same_dtype)


def valid_count_infer(op, attrs, inputs):
    (targets,) = inputs
    require_int(op, targets)
    require_ignore_index(op, attrs, inputs)
    if attrs["dtype"] not in FLOAT_DTYPES:
        raise op_error(op, f"dtype={attrs['dtype']!r} must be a floating-point dtype", inputs,
                       TypeError)
    return [((), attrs["dtype"])]


# count = number of labels != ignore_index (+ beta*count): added over batch tiles
register(OpSpec(name="valid_count", kernel="valid_count", num_inputs=1, num_outputs=1,
                infer=valid_count_infer, axes=lambda attrs, i, o: (labels("b", len(i[0])), ()),
                attrs={"ignore_index": -100, "dtype": "fp32", "beta": 0.0},
                kernel_attrs=("ignore_index", "beta"), beta_attr="beta",
                reads_output=lambda attrs: attrs["beta"] != 0,
                flops=lambda attrs, i, o: numel(i[0]), differentiable=False))


def cross_entropy_lse_infer(op, attrs, inputs):
    """logits [V, batch...], lse [batch...], labels int [batch...], count 0-d (and for the
    backward op, dloss 0-d): the loss is 0-d, the gradient like logits."""
    logits, lse, targets, count = inputs[:4]
    require_float(op, logits, lse, count, *inputs[4:])
    require_same_dtype(op, logits, lse, count, *inputs[4:])
    require_int(op, targets)
    require_ignore_index(op, attrs, inputs)
    if logits.ndim < 1 or targets.shape != logits.shape[1:]:
        raise op_error(op, f"{targets.name} must have the shape of {logits.name} without "
                       "its class axis 0", inputs)
    if lse.shape != logits.shape[1:]:
        raise op_error(op, f"{lse.name} must have the shape of {logits.name} without its "
                       "class axis 0 (the logsumexp over classes)", inputs)
    for scalar in (count, *inputs[4:]):
        if scalar.shape != ():
            raise op_error(op, f"{scalar.name} must be 0-d", inputs)
    return [((), logits.dtype)] if len(inputs) == 4 else [(logits.shape, logits.dtype)]


def cross_entropy_lse_axes(attrs, in_shapes, out_shapes):
    """logits, lse, labels, count (, dloss) -> loss (0-d) or dlogits (like logits)."""
    batch = labels("b", len(in_shapes[2]))
    full = ("class",) + batch
    inputs = (full, batch, batch, ()) + ((),) * (len(in_shapes) - 4)
    return inputs + tuple(full if shape else () for shape in out_shapes)


CROSS_ENTROPY_PARAMS = dict(
    # each class tile knows where it starts, and every tile the class count (label check)
    tile_params=lambda attrs, offsets: {"class_offset": offsets[0][0]},
    shape_params=lambda attrs, in_shapes, out_shapes: {"num_classes": in_shapes[0][0]})

# loss = sum over valid positions p of (lse[p] - logits[label_p, p]) / count (+ beta*loss):
# class tile 0 adds the lse terms, each class tile subtracts the logits of the labels it
# holds; the partial results over class and batch tiles are added
register(OpSpec(name="cross_entropy_lse", kernel="cross_entropy_lse", num_inputs=4,
                num_outputs=1, infer=cross_entropy_lse_infer, axes=cross_entropy_lse_axes,
                attrs={"ignore_index": -100, "beta": 0.0}, beta_attr="beta",
                reads_output=lambda attrs: attrs["beta"] != 0,
                flops=lambda attrs, i, o: 2 * numel(i[2]), backward=cross_entropy_lse_rule,
                **CROSS_ENTROPY_PARAMS))
# dlogits += dloss/count * valid * (exp(logits - lse) - onehot(label)), per class tile
register(OpSpec(name="cross_entropy_lse_backward", kernel="cross_entropy_lse_backward",
                num_inputs=5, num_outputs=1, infer=cross_entropy_lse_infer,
                axes=cross_entropy_lse_axes, attrs={"ignore_index": -100}, reads_output=always,
                flops=lambda attrs, i, o: 4 * numel(i[0]), differentiable=False,
                **CROSS_ENTROPY_PARAMS))
