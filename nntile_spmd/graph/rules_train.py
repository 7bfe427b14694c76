"""Graph layer: rules of embedding, loss and optimizer ops."""

from .backward_linalg import embedding_rule
from .backward_loss import cross_entropy_rule, mse_rule
from .registry import OpSpec, always, labels, op_error, register
from .rules_common import numel, require_float, require_int, require_same_dtype, require_same_shape


def embedding_infer(op, attrs, inputs):
    index, vocab = inputs
    require_int(op, index)
    require_float(op, vocab)
    if vocab.ndim != 2:
        raise op_error(op, f"{vocab.name} must be [embed_dim, vocab_size]", inputs)
    if not isinstance(attrs["axis"], int) or not 0 <= attrs["axis"] <= index.ndim:
        raise op_error(op, f"axis={attrs['axis']!r} out of range", inputs)
    shape = index.shape[:attrs["axis"]] + (vocab.shape[0],) + index.shape[attrs["axis"]:]
    return [(shape, vocab.dtype)]


def embedding_axes(attrs, in_shapes, out_shapes):
    index = labels("b", len(in_shapes[0]))
    embedded = index[:attrs["axis"]] + ("e",) + index[attrs["axis"]:]
    return index, ("e", "v"), embedded


register(OpSpec(name="embedding", kernel="embedding", num_inputs=2, num_outputs=1,
                infer=embedding_infer, axes=embedding_axes, attrs={"axis": 0, "beta": 0.0},
                beta_attr="beta", reads_output=lambda attrs: attrs["beta"] != 0,
                tile_params=lambda attrs, offsets: {"vocab_offset": offsets[1][1]},
                shape_params=lambda attrs, i, o: {"vocab_size": i[1][1]},
                flops=lambda attrs, i, o: numel(o[0]), backward=embedding_rule))


def embedding_backward_infer(op, attrs, inputs):
    index, grad_output = inputs
    require_int(op, index)
    require_float(op, grad_output)
    return [None]


def embedding_backward_axes(attrs, in_shapes, out_shapes):
    index = labels("b", len(in_shapes[0]))
    return index, index[:attrs["axis"]] + ("e",) + index[attrs["axis"]:], ("e", "v")


register(OpSpec(name="embedding_backward", kernel="embedding_backward", num_inputs=2,
                num_outputs=1, infer=embedding_backward_infer, axes=embedding_backward_axes,
                attrs={"axis": 0, "beta": 1.0}, beta_attr="beta",
                reads_output=lambda attrs: attrs["beta"] != 0,
                tile_params=lambda attrs, offsets: {"vocab_offset": offsets[2][1]},
                shape_params=lambda attrs, i, o: {"vocab_size": o[0][1]},
                flops=lambda attrs, i, o: numel(i[1]), differentiable=False))


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


register(OpSpec(name="cross_entropy_loss", kernel="cross_entropy", num_inputs=2, num_outputs=1,
                infer=cross_entropy_infer, axes=cross_entropy_axes,
                attrs={"alpha": 1.0, "beta": 0.0}, beta_attr="beta",
                reads_output=lambda attrs: attrs["beta"] != 0, whole=class_axis,
                flops=lambda attrs, i, o: 5 * numel(i[0]), backward=cross_entropy_rule))
def cross_entropy_backward_axes(attrs, in_shapes, out_shapes):
    """(logits, labels, dloss) -> dlogits: the class axis, then the batch axes."""
    batch = labels("b", len(in_shapes[1]))
    return ("class",) + batch, batch, (), ("class",) + batch


register(OpSpec(name="cross_entropy_loss_backward", kernel="cross_entropy_backward",
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


register(OpSpec(name="mse_loss", kernel="mse", num_inputs=2, num_outputs=1, infer=mse_infer,
                axes=lambda attrs, i, o: (labels("d", len(i[0])),) * 2 + ((),),
                attrs={"alpha": 1.0, "beta": 0.0}, beta_attr="beta",
                reads_output=lambda attrs: attrs["beta"] != 0,
                flops=lambda attrs, i, o: 3 * numel(i[0]), backward=mse_rule))
register(OpSpec(name="mse_loss_backward", kernel="mse_backward", num_inputs=3, num_outputs=1,
                infer=lambda op, attrs, inputs: like_first_input(mse_infer, op, attrs, inputs),
                axes=lambda attrs, i, o: (labels("d", len(i[0])),) * 2 + ((),)
                                         + (labels("d", len(i[0])),),
                attrs={"alpha": 1.0}, reads_output=always,
                flops=lambda attrs, i, o: 4 * numel(i[0]), differentiable=False))


def optimizer_infer(op, attrs, inputs):
    step, grad = inputs
    if step.shape != () or step.dtype != "int64":
        raise op_error(op, f"step counter {step.name} must be a 0-d int64 tensor",
                       inputs, TypeError)
    require_float(op, grad)
    return [(grad.shape, grad.dtype)] * OPTIMIZER_OUTPUTS[op]


def optimizer_axes(attrs, in_shapes, out_shapes):
    dims = labels("d", len(in_shapes[1]))
    return ((), dims) + (dims,) * len(out_shapes)


OPTIMIZER_OUTPUTS = {"sgd_step": 2, "adam_step": 3, "adamw_step": 3}
ADAM_ATTRS = {"lr": 1e-3, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.0}
OPTIMIZER_ATTRS = {
    "sgd_step": {"lr": 1e-2, "momentum": 0.0, "weight_decay": 0.0, "dampening": 0.0,
                 "nesterov": False},
    "adam_step": ADAM_ATTRS,
    "adamw_step": ADAM_ATTRS | {"weight_decay": 1e-2},
}
for optimizer, outputs in OPTIMIZER_OUTPUTS.items():
    register(OpSpec(name=optimizer, kernel=optimizer, num_inputs=2, num_outputs=outputs,
                    infer=optimizer_infer, axes=optimizer_axes,
                    attrs=OPTIMIZER_ATTRS[optimizer], reads_output=always,
                    flops=lambda attrs, i, o: 10 * numel(i[1]), differentiable=False))

