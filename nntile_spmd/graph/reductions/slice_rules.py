"""Graph layer: registry entries of the ops between a tensor and its slices along
one axis (sum_slice, add_slice, sumprod_slice, logsumexp, max/min, norm_slice, ...).

A slice of x along `axis` has x's shape with that axis removed; these ops reduce x
into a slice or broadcast a slice back along the axis. No op here keeps the axis whole:
per tile they are elementwise, or a reduction whose partial results the plan merges with
the op's combine kernel (add, logaddexp, maximum, minimum, hypot), so the axis may be
split over tiles and ranks. Each op's operands follow a pattern such as "fss->f": f is a
full tensor (all like the first one), s a slice of it.
"""

from __future__ import annotations

from ..checks import numel, require_axis, require_float, require_same_dtype
from ..registry import OpSpec, always, labels, op_error
from .backward import (add_slice_inplace_rule, add_slice_rule, extremum_rule, logsumexp_rule,
                       multiply_slice_rule, norm_slice_inplace_rule, norm_slice_rule,
                       softmax_from_logsumexp_rule, sum_slice_rule, sumprod_slice_rule)

ENTRIES: list[OpSpec] = []   # this module's share of the family's entries
add_spec = ENTRIES.append   # each add_spec(OpSpec(...)) below joins ENTRIES


def slice_of(shape, axis) -> tuple:
    return tuple(shape[:axis]) + tuple(shape[axis + 1:])


def slice_infer(pattern, nonnegative_beta=False):
    """Shape rule of an op whose operands follow `pattern` ("ff->s", ...); logsumexp's
    beta scales exp(y), so it must be >= 0 (a plain coefficient such as add_slice's need not)."""
    in_kinds, out_kinds = pattern.split("->")

    def infer(op, attrs, inputs):
        require_float(op, *inputs)
        require_same_dtype(op, *inputs)
        full = inputs[in_kinds.index("f")]
        require_axis(op, attrs["axis"], full.ndim, inputs)
        shapes = {"f": full.shape, "s": slice_of(full.shape, attrs["axis"])}
        for tensor, kind in zip(inputs, in_kinds):
            if tensor.shape != shapes[kind]:
                what = f"the shape of {full.name}" if kind == "f" else \
                    f"shape {list(shapes[kind])} (the slice of {full.name} along axis " \
                    f"{attrs['axis']})"
                raise op_error(op, f"{tensor.name} must have {what}", inputs)
        if nonnegative_beta and attrs["beta"] < 0:
            raise op_error(op, f"beta={attrs['beta']} must be >= 0", inputs)
        return [(shapes[kind], full.dtype) for kind in out_kinds]
    return infer


def slice_axes(pattern):
    """Axis labels of the operands: the slice lacks the full tensor's label d<axis>."""
    kinds = pattern.replace("->", "")
    full_position = kinds.index("f")

    def axes(attrs, in_shapes, out_shapes):
        full = labels("d", len((*in_shapes, *out_shapes)[full_position]))
        part = slice_of(full, attrs["axis"])
        return tuple(full if kind == "f" else part for kind in kinds)
    return axes


def full_flops(per_element):
    """FLOPs per element of the full tensor (its first occurrence in the operands)."""
    def flops(attrs, in_shapes, out_shapes):
        return per_element * max(numel(shape) for shape in (*in_shapes, *out_shapes))
    return flops


def add_slice_op(name, pattern, attrs, per_element, kernel=None, nonnegative_beta=False,
                      **options):
    add_spec(OpSpec(name=name, kernel=kernel or name, num_inputs=pattern.index("->"),
                    num_outputs=len(pattern) - pattern.index("->") - 2,
                    infer=slice_infer(pattern, nonnegative_beta), axes=slice_axes(pattern),
                    attrs=attrs, flops=full_flops(per_element), **options))


BETA = dict(beta_attr="beta", reads_output=lambda attrs: attrs["beta"] != 0)

# z = alpha * sum over axis of x*y + beta*z: partial sums over the axis's tiles are added
add_slice_op("sumprod_slice", "ff->s", {"axis": 0, "alpha": 1.0, "beta": 0.0}, 2,
                  backward=sumprod_slice_rule, **BETA)

# dx += alpha * s (broadcast along axis) * x: sumprod_slice's gradient for one factor
add_slice_op("sumprod_slice_backward", "sf->f", {"axis": 0, "alpha": 1.0}, 3,
                  reads_output=always, differentiable=False)

# y = log(exp(logsumexp of x along axis) + beta*exp(y)): the partial results of the
# axis's tiles are merged by logaddexp (kernel logsumexp_merge), not added
add_slice_op("logsumexp", "f->s", {"axis": 0, "beta": 0.0}, 4,
                  combine="logsumexp_merge", nonnegative_beta=True, backward=logsumexp_rule,
                  **BETA)

# dx += exp(x - y) * dy, y and dy broadcast along axis (y = logsumexp(x))
add_slice_op("logsumexp_backward", "fss->f", {"axis": 0}, 4, reads_output=always,
                  differentiable=False)

# y = exp(x - lse), lse broadcast along axis: softmax of x when lse = logsumexp(x, axis)
add_slice_op("softmax_from_logsumexp", "sf->f", {"axis": 0}, 2,
                  backward=softmax_from_logsumexp_rule)

# dx += y * (dy - d), d broadcast along axis (d = sumprod_slice(y, dy)): softmax's backward
add_slice_op("softmax_from_logsumexp_backward", "ffs->f", {"axis": 0}, 3,
                  reads_output=always, differentiable=False)

# LayerNorm's slice ops. s = alpha * sum over axis of x + beta*s (partial sums are added)
add_slice_op("sum_slice", "f->s", {"axis": 0, "alpha": 1.0, "beta": 0.0}, 1,
                  backward=sum_slice_rule, **BETA)

# z = alpha * s (broadcast along axis) + beta*x, and the same into x itself
for add_slice_name, add_slice_backward in (("add_slice", add_slice_rule),
                                           ("add_slice_inplace", add_slice_inplace_rule)):
    add_slice_op(add_slice_name, "sf->f", {"axis": 0, "alpha": 1.0, "beta": 1.0}, 3,
                      kernel="add_slice", backward=add_slice_backward,
                      in_place=(1,) if add_slice_name == "add_slice_inplace" else ())

# z = alpha * s (broadcast along axis) * x
add_slice_op("multiply_slice", "sf->f", {"axis": 0, "alpha": 1.0}, 2,
                  backward=multiply_slice_rule)

# -- reductions along one axis (the builders chain them over several axes) -------------
# y = max (min) of x along `axis`, merged with beta*y (the partial of earlier tiles)
add_slice_op("max", "f->s", {"axis": 0, "beta": 0.0}, 1, kernel="max_slice",
                  combine="maximum", backward=extremum_rule, **BETA)

add_slice_op("min", "f->s", {"axis": 0, "beta": 0.0}, 1, kernel="min_slice",
                  combine="minimum", backward=extremum_rule, **BETA)

# count = number of x equal to the extremum y along `axis` (+ beta*count): partial counts add
add_slice_op("extremum_count", "fs->s", {"axis": 0, "beta": 0.0}, 1,
                  differentiable=False, **BETA)

# dx += dy / count where x equals y (inputs x, y, count, dy): ties share the gradient
add_slice_op("extremum_backward", "fsss->f", {"axis": 0}, 2, reads_output=always,
                  differentiable=False)

# y = hypot(alpha * 2-norm of x along `axis`, beta*y) (NNTile's norm_slice_inplace); the
# new-output form norm_slice has beta = 0 unless it accumulates into a given y
NORM_ATTRS = {"axis": 0, "alpha": 1.0, "beta": 0.0}

add_slice_op("norm_slice", "f->s", NORM_ATTRS, 2, combine="hypot",
                  backward=norm_slice_rule, **BETA)

add_slice_op("norm_slice_inplace", "f->s", NORM_ATTRS | {"beta": 1.0}, 2,
                  kernel="norm_slice", combine="hypot", backward=norm_slice_inplace_rule,
                  **BETA)

# dx += alpha^2 * x / y * dy, y and dy broadcast along `axis`: norm_slice's gradient
add_slice_op("norm_slice_backward", "fss->f", {"axis": 0, "alpha": 1.0}, 3,
                  reads_output=always, differentiable=False)
