"""Graph layer: named runtime scalars, op attributes whose value is set between executes.

An attribute holding `Scalar("lr", 1e-3)` is not baked into the plan: the runtime
looks the value up in its scalar table at each execute (CompiledGraph.set_scalar),
so a learning-rate schedule needs no recompile. No numba, cupy or mpi4py here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Real


# the runtime scalars of dropout (graph.ops.dropout as the models build it): a training
# loop sets DROPOUT_ON to 1 for its executes and back to 0 after them (so evaluation and
# every other execute run without dropout), and DROPOUT_STEP to the step's number (a new
# mask every step, the same one again when a run resumes from a checkpoint)
DROPOUT_ON, DROPOUT_STEP = "dropout", "dropout_step"


@dataclass(frozen=True)
class Scalar:
    """The runtime value of scalar `name` times `factor`; `default` until it is set."""

    name: str
    default: float
    factor: float = 1.0

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"a scalar needs a non-empty str name, got {self.name!r}")
        check_value(self.name, self.default)
        check_value(self.name, self.factor)

    def __neg__(self) -> Scalar:
        return Scalar(self.name, self.default, -self.factor)

    def __mul__(self, other) -> Scalar:
        check_value(self.name, other)
        return Scalar(self.name, self.default, self.factor * float(other))

    __rmul__ = __mul__

    def resolve(self, values: dict) -> float:
        """This attribute's value given the table {scalar name: value}."""
        return self.factor * values[self.name]

    def __repr__(self) -> str:
        # exact floats: the plan fingerprint compared across ranks is built from reprs
        scale = "" if self.factor == 1.0 else f"{self.factor!r}*"
        return f"{scale}${self.name}={self.default!r}"


def check_value(name, value) -> float:
    """A scalar value must be a finite real number (bools are rejected)."""
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value):
        raise TypeError(f"scalar {name!r}: value {value!r} is not a finite real number")
    return float(value)


def check_scalar_attrs(spec, attrs: dict) -> None:
    """A Scalar may stand only for a float coefficient the kernel reads at run time.

    An attribute with a bool or int default (trans_a, axis, ndim) shapes the
    tiling or the tile tasks, and the beta attribute decides what the plan reads,
    so a value unknown at plan time would give a wrong plan, not an error.
    """
    kernel_names = spec.attrs if spec.kernel_attrs is None else spec.kernel_attrs
    for key, value in attrs.items():
        if not isinstance(value, Scalar):
            continue
        if key == spec.beta_attr:
            reason = "the accumulation coefficient shapes the plan"
        elif type(spec.attrs[key]) is not float:
            reason = "only float coefficients can be"
        elif key not in kernel_names:
            reason = "the kernel does not read this attribute"
        else:
            continue
        raise TypeError(f"{spec.name}: {key}={value!r}: {reason}; it cannot be a runtime "
                        "scalar")


def graph_scalars(graph) -> dict:
    """{scalar name: default} of every Scalar in the ops of `graph`; defaults must agree."""
    defaults, first_user = {}, {}
    for op in graph.ops():
        for key, value in op.attrs.items():
            if not isinstance(value, Scalar):
                continue
            known = defaults.setdefault(value.name, value.default)
            first_user.setdefault(value.name, f"{op.name}.{key}")
            if known != value.default:
                raise ValueError(f"scalar {value.name!r} has default {known:g} in "
                                 f"{first_user[value.name]} but {value.default:g} in "
                                 f"{op.name}.{key}; give the two different names")
    return defaults
