"""Graph layer: builders of the slice ops (rules_slice.py), re-exported by `nntile_spmd.ops`.

A slice of x along `axis` is x with that axis removed; every op here lets the axis
be split over tiles and ranks.
"""

from __future__ import annotations

from .apply import apply


def sumprod_slice(x, y, name, axis=0, alpha=1.0, beta=0.0):
    """z = alpha * sum over `axis` of x*y (that axis removed) + beta*z.

    `name` is a new tensor's name, or an existing tensor z to accumulate into (beta != 0).
    """
    return apply("sumprod_slice", [x, y], [name], axis=axis, alpha=alpha, beta=beta)


def sumprod_slice_backward(slice_grad, x, grad_y, axis=0, alpha=1.0):
    """grad_y += alpha * slice_grad (broadcast along `axis`) * x: the gradient of
    sumprod_slice's output with respect to its other factor y."""
    return apply("sumprod_slice_backward", [slice_grad, x], [grad_y], axis=axis, alpha=alpha)


def sum_slice(x, name, axis=0, alpha=1.0, beta=0.0):
    """s = alpha * sum of x over `axis` (that axis removed) + beta*s.

    `name` is a new tensor's name, or an existing tensor s to accumulate into (beta != 0).
    """
    return apply("sum_slice", [x], [name], axis=axis, alpha=alpha, beta=beta)


def add_slice(alpha, s, beta, x, name, axis=0):
    """z = alpha * s (a slice of x, broadcast along `axis`) + beta*x."""
    return apply("add_slice", [s, x], [name], axis=axis, alpha=alpha, beta=beta)


def add_slice_inplace(alpha, s, beta, x, axis=0):
    """x = alpha * s (a slice of x, broadcast along `axis`) + beta*x."""
    return apply("add_slice_inplace", [s, x], [x], axis=axis, alpha=alpha, beta=beta)


def multiply_slice(s, x, name, axis=0, alpha=1.0):
    """z = alpha * s (a slice of x, broadcast along `axis`) * x."""
    return apply("multiply_slice", [s, x], [name], axis=axis, alpha=alpha)


def logsumexp(x, name, axis=0, beta=0.0):
    """y = log(sum(exp(x))) along `axis` (that axis removed), computed stably.

    With an existing tensor y as `name` and beta > 0: y = log(exp(logsumexp(x)) + beta*exp(y))
    (beta=1 is logaddexp). The axis may be split over tiles and ranks: partial results
    are merged by logaddexp; a slice of all -inf gives -inf, never nan.
    """
    return apply("logsumexp", [x], [name], axis=axis, beta=beta)


def logsumexp_backward(x, y, grad_y, grad_x, axis=0):
    """grad_x += exp(x - y) * grad_y, y and grad_y broadcast along `axis`; y = logsumexp(x)."""
    return apply("logsumexp_backward", [x, y, grad_y], [grad_x], axis=axis)


def softmax_from_logsumexp(lse, x, name, axis=0):
    """y = exp(x - lse), lse broadcast along `axis`: the softmax of x along `axis`.

    lse must be logsumexp(x, axis) (as computed by ops.logsumexp): the op is elementwise
    per tile, so the axis may be split over tiles and ranks, and its backward rule is
    softmax's total derivative, which holds only for that lse (lse gets no gradient).
    """
    return apply("softmax_from_logsumexp", [lse, x], [name], axis=axis)


def softmax_from_logsumexp_backward(y, grad_y, dot, grad_x, axis=0):
    """grad_x += y * (grad_y - dot), dot broadcast along `axis`; with
    dot = sumprod_slice(y, grad_y, axis) this is softmax's backward."""
    return apply("softmax_from_logsumexp_backward", [y, grad_y, dot], [grad_x], axis=axis)
