"""Graph layer: rules of utility ops (clear, fill, add_scalar, copy, cast)."""

from .backward_linalg import copy_rule
from .dtypes import check_dtype
from .registry import OpSpec, always, labels, op_error, register
from .rules_common import elementwise_axes, numel


def given_output(op, attrs, inputs):
    """Ops that write a tensor they are given: any shape and dtype."""
    return [None]


def output_only_axes(attrs, in_shapes, out_shapes):
    return (labels("d", len(out_shapes[0])),)


register(OpSpec(name="clear", kernel="clear", num_inputs=0, num_outputs=1, infer=given_output,
                axes=output_only_axes, differentiable=False))
register(OpSpec(name="fill", kernel="fill", num_inputs=0, num_outputs=1, infer=given_output,
                axes=output_only_axes, attrs={"value": 0.0}, differentiable=False))
register(OpSpec(name="add_scalar", kernel="add_scalar", num_inputs=0, num_outputs=1,
                infer=given_output, axes=output_only_axes, attrs={"value": 1},
                reads_output=always, differentiable=False))


def copy_infer(op, attrs, inputs):
    return [(inputs[0].shape, inputs[0].dtype)]


def cast_infer(op, attrs, inputs):
    try:
        dtype = check_dtype(attrs["dtype"])
    except TypeError as error:
        raise op_error(op, str(error), inputs, TypeError) from None
    return [(inputs[0].shape, dtype)]


register(OpSpec(name="copy", kernel="copy", num_inputs=1, num_outputs=1, infer=copy_infer,
                axes=elementwise_axes, flops=lambda attrs, i, o: 0, backward=copy_rule))
register(OpSpec(name="cast", kernel="cast", num_inputs=1, num_outputs=1, infer=cast_infer,
                axes=elementwise_axes, attrs={"dtype": "fp32"}, kernel_attrs=(),
                flops=lambda attrs, i, o: numel(o[0]), backward=copy_rule))
