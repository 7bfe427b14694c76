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


# The config fields that leave what a model computes from given weights unchanged, with
# why: a pretrained folder may differ from the model it is loaded into in these
# (load_pretrained), as transformers' from_pretrained(path, attn_pdrop=0.0) allows too.
# Every field not named here changes the computation and must match.
DROPOUT = "a dropout probability: a training choice of the model built (evaluation has none)"
FIELDS_LOADING_IGNORES = {
    "initializer_range": "sets only the initial weights, which loading replaces",
    "resid_pdrop": DROPOUT, "embd_pdrop": DROPOUT, "attn_pdrop": DROPOUT,   # GPT-2
    "attention_dropout": DROPOUT,                                          # Llama
}


def fields_that_differ(ours, theirs) -> list:
    """The names of the fields of config `ours` that change the computation and that
    config `theirs` (of the same class) sets otherwise."""
    return [name for name, value in vars(ours).items()
            if name not in FIELDS_LOADING_IGNORES and getattr(theirs, name) != value]
