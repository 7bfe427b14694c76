"""Plan layer: the parameters of an EXEC, an immutable and hashable mapping, checked
against the kernel's declaration when the op is lowered.

A kernel declares its parameter names once, as keyword parameters of its entry in the
NumPy reference table (nntile_kernels/reference.py, the specification every backend
matches); a parameter name has one type in every kernel (NNTile's calling convention:
`alpha` is always a real, `axis` always an int), declared once in PARAM_TYPES.
"""

from __future__ import annotations

import functools
import inspect
from numbers import Integral, Real

from ..graph.scalars import Scalar


class KernelParams(dict):
    """An EXEC's keyword parameters. A dict, so `kernel(*tiles, **params)` stays a plain
    call, but one that cannot change: the plan shares one instance among many EXECs.
    New values make new params (`with_values`)."""

    __slots__ = ()

    def _immutable(self, *args, **kwargs):
        raise TypeError("kernel params cannot change: build new ones with "
                        "params.with_values(name=value)")

    __setitem__ = __delitem__ = __ior__ = _immutable
    clear = pop = popitem = setdefault = update = _immutable

    def __hash__(self):
        return hash(frozenset((name, hashable(value)) for name, value in self.items()))

    def __reduce__(self):
        return KernelParams, (dict(self),)

    def copy(self) -> KernelParams:
        return self

    def with_values(self, **changes) -> KernelParams:
        """These params with `changes` applied."""
        return KernelParams(self, **changes)


def hashable(value):
    return tuple(map(hashable, value)) if isinstance(value, (list, tuple)) else value


def is_real(value) -> bool:
    return type(value) is Scalar or (isinstance(value, Real) and not isinstance(value, bool))


def is_int(value) -> bool:
    return isinstance(value, Integral) and not isinstance(value, bool)


def is_ints(value) -> bool:
    return isinstance(value, (tuple, list)) and all(map(is_int, value))


def is_flag(value) -> bool:
    return isinstance(value, bool) or type(value).__name__ == "bool_"


def is_view_shapes(value) -> bool:
    """reshaped_call's ((operand position, tile shape), ...)."""
    return isinstance(value, tuple) and all(
        len(item) == 2 and is_int(item[0]) and is_ints(item[1]) for item in value)


REAL = ("a real or a runtime Scalar", is_real)
INT = ("an int", is_int)
INTS = ("a tuple of ints", is_ints)
FLAG = ("a bool", is_flag)
PARAM_TYPES = {
    **dict.fromkeys(("alpha", "beta", "value", "val", "exp", "eps", "mean", "stddev",
                     "lr", "beta1", "beta2", "weight_decay", "momentum", "dampening", "p",
                     "step"), REAL),
    **dict.fromkeys(("axis", "batch_ndim", "ndim", "ignore_index", "num_classes",
                     "class_offset", "vocab_size", "vocab_offset", "seed", "key_offset",
                     "query_offset"), INT),
    **dict.fromkeys(("x_offset", "y_offset", "x_shape", "y_shape", "padding", "stride",
                     "dilation", "x_start", "c_start", "y_start", "src_start", "dst_start",
                     "offset", "shape", "perm"), INTS),
    **dict.fromkeys(("trans_a", "trans_b", "nesterov"), FLAG),
    "compute_type": ("None or a str", lambda value: value is None or isinstance(value, str)),
    "view_kernel": ("a str", lambda value: isinstance(value, str)),
    "view_shapes": ("a tuple of (position, shape)", is_view_shapes),
}


@functools.cache
def declared_params(kernel: str) -> tuple:
    """(every keyword parameter, the required ones) of `kernel` in the reference table."""
    from nntile_kernels import get_kernels
    function = get_kernels("reference").get(kernel)
    if function is None:
        return None
    parameters = [p for p in inspect.signature(function).parameters.values()
                  if p.kind is p.KEYWORD_ONLY]
    return (frozenset(p.name for p in parameters),
            frozenset(p.name for p in parameters if p.default is p.empty))


def checked_params(op, kernel: str, params: dict) -> KernelParams:
    """`params` as KernelParams, once their names and types match what `kernel` declares;
    else a TypeError naming the op and the kernel."""
    declared = declared_params(kernel)
    where = f"op {op.name!r} ({op.op_type}): kernel {kernel!r}"
    if declared is None:
        raise TypeError(f"{where} is not in the kernel tables")
    names, required = declared
    unknown, missing = set(params) - names, required - set(params)
    if unknown or missing:
        raise TypeError(f"{where} takes parameters {sorted(names)}; got unknown "
                        f"{sorted(unknown)}, missing {sorted(missing)}")
    for name, value in params.items():
        kind, check = PARAM_TYPES.get(name, (None, None))
        if check is None:
            raise TypeError(f"{where}: parameter {name!r} has no declared type "
                            "(plan/kernel_params.py PARAM_TYPES)")
        if not check(value):
            raise TypeError(f"{where}: parameter {name!r} must be {kind}, got {value!r}")
    return KernelParams(params)
