"""Graph layer: registry entries and backward rules of the losses. Each rule adds the
loss's backward kernel, which accumulates into the gradient of the logits or inputs.

cross_entropy = logsumexp over the class axis (split: merged by logaddexp), valid_count
(how many labels are not ignore_index) and cross_entropy_lse, a sum over class and batch
tiles whose partial results are added: every op lets the class axis be split over tiles
and ranks (vocab-parallel, as Megatron does). Labels are checked when the kernels run.
"""

from __future__ import annotations

from .. import ops
from ..checks import (numel, require_float, require_ignore_index, require_int,
                      require_same_dtype, require_same_shape)
from ..dtypes import FLOAT_DTYPES
from ..gradients import refuse_accumulating_output
from ..registry import OpSpec, add_entries, always, labels, op_error

ENTRIES: list[OpSpec] = []   # the family's registry entries, in writing order
add_spec = ENTRIES.append   # each add_spec(OpSpec(...)) below joins ENTRIES


def cross_entropy_lse_rule(op, ctx):
    """dlogits += dloss/count * valid * (softmax(logits) - onehot(label)).

    lse gets no gradient on purpose: this is the total derivative of
    lse(logits) - logits[label], the path through lse = logsumexp(logits) included
    (its d lse / d logits is the softmax term).
    """
    logits, lse, labels, count = op.inputs
    loss = op.outputs[0]
    refuse_accumulating_output(op, ctx)
    if ctx.needs(logits):
        ops.cross_entropy_lse_backward(logits, lse, labels, count, ctx.grad(loss),
                                       ctx.grad(logits), op.attrs["ignore_index"])


def cross_entropy_rule(op, ctx):
    logits, labels = op.inputs
    if ctx.needs(logits):
        ops.cross_entropy_loss_backward(logits, labels, ctx.grad(op.outputs[0]),
                                        ctx.grad(logits), op.attrs["alpha"])


def mse_rule(op, ctx):
    x, y = op.inputs
    dloss = ctx.grad(op.outputs[0])
    for tensor, other in ((x, y), (y, x)):
        if ctx.needs(tensor):   # d/dx sum((x - y)^2) = 2 (x - y), symmetric in sign
            ops.mse_loss_backward(tensor, other, dloss, ctx.grad(tensor), op.attrs["alpha"])


def valid_count_infer(op, attrs, inputs):
    (targets,) = inputs
    require_int(op, targets)
    require_ignore_index(op, attrs, inputs)
    if attrs["dtype"] not in FLOAT_DTYPES:
        raise op_error(op, f"dtype={attrs['dtype']!r} must be a floating-point dtype", inputs,
                       TypeError)
    return [((), attrs["dtype"])]


# count = number of labels != ignore_index (+ beta*count): added over batch tiles
add_spec(OpSpec(name="valid_count", kernel="valid_count", num_inputs=1, num_outputs=1,
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
add_spec(OpSpec(name="cross_entropy_lse", kernel="cross_entropy_lse", num_inputs=4,
                num_outputs=1, infer=cross_entropy_lse_infer, axes=cross_entropy_lse_axes,
                attrs={"ignore_index": -100, "beta": 0.0}, beta_attr="beta",
                reads_output=lambda attrs: attrs["beta"] != 0,
                flops=lambda attrs, i, o: 2 * numel(i[2]), backward=cross_entropy_lse_rule,
                **CROSS_ENTROPY_PARAMS))

# dlogits += dloss/count * valid * (exp(logits - lse) - onehot(label)), per class tile
add_spec(OpSpec(name="cross_entropy_lse_backward", kernel="cross_entropy_lse_backward",
                num_inputs=5, num_outputs=1, infer=cross_entropy_lse_infer,
                axes=cross_entropy_lse_axes, attrs={"ignore_index": -100}, reads_output=always,
                flops=lambda attrs, i, o: 4 * numel(i[0]), differentiable=False,
                **CROSS_ENTROPY_PARAMS))


def like_first_input(forward_infer, op, attrs, inputs):
    """Backward of a loss: check as the forward does; the gradient is like inputs[0]."""
    forward_infer(op, attrs, inputs)
    return [(inputs[0].shape, inputs[0].dtype)]


def cross_entropy_infer(op, attrs, inputs):
    logits, targets = inputs[:2]
    require_float(op, logits)
    require_int(op, targets)
    if logits.shape[1:] != targets.shape or logits.ndim < 1:
        raise op_error(op, f"{targets.name} must have the shape of {logits.name} "
                       "without its class axis 0", inputs)
    return [((), logits.dtype)]


def cross_entropy_axes(attrs, in_shapes, out_shapes):
    batch = labels("b", len(in_shapes[1]))
    return ("class",) + batch, batch, ()


def class_axis(attrs, axes):
    return frozenset({"class"})


add_spec(OpSpec(name="cross_entropy_loss", kernel="cross_entropy", num_inputs=2, num_outputs=1,
                infer=cross_entropy_infer, axes=cross_entropy_axes,
                attrs={"alpha": 1.0, "beta": 0.0}, beta_attr="beta",
                reads_output=lambda attrs: attrs["beta"] != 0, whole=class_axis,
                flops=lambda attrs, i, o: 5 * numel(i[0]), backward=cross_entropy_rule))


def cross_entropy_backward_axes(attrs, in_shapes, out_shapes):
    """(logits, labels, dloss) -> dlogits: the class axis, then the batch axes."""
    batch = labels("b", len(in_shapes[1]))
    return ("class",) + batch, batch, (), ("class",) + batch


add_spec(OpSpec(name="cross_entropy_loss_backward", kernel="cross_entropy_backward",
                num_inputs=3, num_outputs=1,
                infer=lambda op, attrs, inputs: like_first_input(cross_entropy_infer, op,
                                                                 attrs, inputs),
                axes=cross_entropy_backward_axes,
                attrs={"alpha": 1.0}, reads_output=always, whole=class_axis,
                flops=lambda attrs, i, o: 6 * numel(i[0]), differentiable=False))


def mse_infer(op, attrs, inputs):
    x, y = inputs[:2]
    require_float(op, x, y)
    require_same_dtype(op, x, y)
    require_same_shape(op, x, y)
    return [((), x.dtype)]


add_spec(OpSpec(name="mse_loss", kernel="mse", num_inputs=2, num_outputs=1, infer=mse_infer,
                axes=lambda attrs, i, o: (labels("d", len(i[0])),) * 2 + ((),),
                attrs={"alpha": 1.0, "beta": 0.0}, beta_attr="beta",
                reads_output=lambda attrs: attrs["beta"] != 0,
                flops=lambda attrs, i, o: 3 * numel(i[0]), backward=mse_rule))

add_spec(OpSpec(name="mse_loss_backward", kernel="mse_backward", num_inputs=3, num_outputs=1,
                infer=lambda op, attrs, inputs: like_first_input(mse_infer, op, attrs, inputs),
                axes=lambda attrs, i, o: (labels("d", len(i[0])),) * 2 + ((),)
                                         + (labels("d", len(i[0])),),
                attrs={"alpha": 1.0}, reads_output=always,
                flops=lambda attrs, i, o: 4 * numel(i[0]), differentiable=False))


def register(registry: dict) -> None:
    """Add the losses entries to `registry` (graph/families.py calls it)."""
    add_entries(registry, ENTRIES)

