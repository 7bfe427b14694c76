"""Graph layer: the shape, dtype and axis checks shared by the op families' builders
and rule tables (they register nothing and import no family).
"""

from __future__ import annotations

from .dtypes import FLOAT_DTYPES, INT_DTYPES
from .registry import labels, op_error


def numel(shape) -> int:
    """Element count of a concrete shape (symbols count as 1 for estimates)."""
    count = 1
    for dim in shape:
        count *= dim if isinstance(dim, int) else 1
    return count


def require_float(op, *tensors):
    for tensor in tensors:
        if tensor.dtype not in FLOAT_DTYPES:
            raise op_error(op, f"{tensor.name} must be a floating-point tensor",
                           tensors, TypeError)


def require_int(op, *tensors):
    for tensor in tensors:
        if tensor.dtype not in INT_DTYPES:
            raise op_error(op, f"{tensor.name} must be an int64/int32 index tensor",
                           tensors, TypeError)


def require_same_dtype(op, *tensors):
    dtypes = {tensor.dtype for tensor in tensors}
    if len(dtypes) > 1:
        raise op_error(op, "dtypes differ (no implicit casts; use cast)", tensors, TypeError)


def require_same_shape(op, *tensors):
    shapes = {tensor.shape for tensor in tensors}
    if len(shapes) > 1:
        raise op_error(op, "shapes differ", tensors)


def require_axis(op, axis, ndim, tensors, what="axis"):
    if not isinstance(axis, int) or not 0 <= axis < ndim:
        raise op_error(op, f"{what}={axis!r} out of range for {ndim} dims", tensors)


def elementwise_infer(op, attrs, inputs):
    """All inputs share shape and float dtype; one output like them."""
    require_float(op, *inputs)
    require_same_dtype(op, *inputs)
    require_same_shape(op, *inputs)
    return [(inputs[0].shape, inputs[0].dtype)]


def elementwise_axes(attrs, in_shapes, out_shapes):
    """Every array has the same axes."""
    return tuple(labels("d", len(shape)) for shape in (*in_shapes, *out_shapes))


def elementwise_flops(per_element):
    return lambda attrs, in_shapes, out_shapes: per_element * numel(out_shapes[0])


def require_ignore_index(op, attrs, tensors):
    if not isinstance(attrs["ignore_index"], int) or isinstance(attrs["ignore_index"], bool):
        raise op_error(op, f"ignore_index={attrs['ignore_index']!r} must be an int", tensors,
                       TypeError)


def given_output(op, attrs, inputs):
    """Ops that write a tensor they are given: any shape and dtype."""
    return [None]


def output_only_axes(attrs, in_shapes, out_shapes):
    return (labels("d", len(out_shapes[0])),)
