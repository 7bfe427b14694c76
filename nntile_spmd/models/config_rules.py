"""Models layer: the field rules that the HF-style configs share.

A dataclass takes any value, and a count that is not a positive int built a wrong
model without a word (n_layer=-1: a GPT-2 with no layers, range(-1) being empty).
"""

from __future__ import annotations

import math
from numbers import Integral, Real


def is_count(value) -> bool:
    return isinstance(value, Integral) and not isinstance(value, bool) and value >= 1


def is_positive(value) -> bool:
    return isinstance(value, Real) and not isinstance(value, bool) and \
        math.isfinite(value) and value > 0


COUNT = (is_count, "a positive int")
OPTIONAL_COUNT = (lambda value: value is None or is_count(value), "a positive int or None")
POSITIVE = (is_positive, "a positive finite number")


def check_fields(config, rules: dict) -> None:
    """Raise ValueError naming the first field of `config` its rule refuses;
    rules: {field name: (accepts(value), what the value must be)}."""
    for name, (accepts, expected) in rules.items():
        value = getattr(config, name)
        if not accepts(value):
            raise ValueError(f"{type(config).__name__}: {name}={value!r} must be {expected}")
