"""Models layer: add_optimizer() appends an optimizer step (SGD, Adam, AdamW) to a graph.

The update is ordinary graph ops in phase "optimizer": a persistent step counter,
persistent state tensors next to each parameter, the step ops, then zero_grad.
Imports the graph layer only (no plan, runtime, numba or mpi4py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from numbers import Real

from ..graph import get_spec, ops
from ..graph.autodiff import unique_name
from ..graph.scalars import Scalar, graph_scalars

# kind -> (op builder, names of the state tensors after the parameter, allowed hyperparameters)
# The float hyperparameters become runtime scalars; `nesterov` changes the update's
# form, so it stays a compile-time attribute.
OPTIMIZERS = {
    "sgd": (ops.sgd_step, ("velocity",),
            ("lr", "momentum", "weight_decay", "dampening", "nesterov")),
    "adam": (ops.adam_step, ("m", "v"), ("lr", "beta1", "beta2", "eps", "weight_decay")),
    "adamw": (ops.adamw_step, ("m", "v"), ("lr", "beta1", "beta2", "eps", "weight_decay")),
}


@dataclass(frozen=True)
class OptimizerInfo:
    """What add_optimizer added: the step counter and each parameter's state tensors."""

    kind: str
    step: str                   # name of the 0-d int64 step counter
    state: dict                 # parameter name -> tuple of state tensor names
    hyper: dict
    scalars: dict = field(default_factory=dict)   # hyperparameter -> runtime scalar name

    @property
    def state_names(self) -> list:
        """All optimizer state tensor names (the step counter included)."""
        return [self.step] + [name for names in self.state.values() for name in names]


def add_optimizer(graph, params, grads, kind: str = "adam", scalar_prefix: str = "",
                  **hyper) -> OptimizerInfo:
    """Append `kind` ("sgd" | "adam" | "adamw") updating `params` from `grads`.

    Adds, in phase "optimizer": step += 1 on a persistent 0-d int64 counter (so
    the kernels see the 1-based step and bias correction survives executes), one
    step op per parameter with persistent state <param>_m/<param>_v (Adam/AdamW)
    or <param>_velocity (SGD; allocated even when momentum is 0, because the op
    always names it), then clear(grad) for every gradient (zero_grad). State
    tensors start as zeros and share their parameter's axes, so every preset
    places them with the parameter.

    Every float hyperparameter (lr, weight_decay, momentum, dampening, beta1,
    beta2, eps) is a runtime scalar named `scalar_prefix + name` whose default is
    the value given here: `cg.set_scalar("lr", v)` changes it between executes
    without recompiling. Two optimizers in one graph that use the same names
    share those scalars (their defaults must then agree); give one of them a
    `scalar_prefix` (e.g. "head_", making "head_lr") to set them apart.
    """
    if kind not in OPTIMIZERS:
        raise ValueError(f"add_optimizer: unknown kind {kind!r}; expected one of "
                         f"{sorted(OPTIMIZERS)}")
    builder, suffixes, allowed = OPTIMIZERS[kind]
    unknown = set(hyper) - set(allowed)
    if unknown:
        raise TypeError(f"add_optimizer({kind!r}): unknown hyperparameter(s) {sorted(unknown)}; "
                        f"expected some of {list(allowed)}")
    params, grads = list(params), list(grads)
    check_pairs(params, grads)
    given = set(hyper)
    hyper, scalars = runtime_scalars(graph, f"{kind}_step", scalar_prefix, hyper)
    state = {}
    with graph.phase("optimizer"):
        step = graph.tensor([], unique_name(graph, "optimizer_step"), dtype="int64",
                            persistent=True)
        ops.add_scalar(step, 1)
        for param, gradient in zip(params, grads):
            tensors = [graph.tensor(param.shape, unique_name(graph, f"{param.name}_{suffix}"),
                                    param.dtype, persistent=True) for suffix in suffixes]
            builder(step, gradient, param, *tensors, **hyper)
            state[param.name] = tuple(t.name for t in tensors)
        for gradient in grads:
            ops.clear(gradient)
    plain = {key: value.default if isinstance(value, Scalar) else value
             for key, value in hyper.items() if key in given}
    return OptimizerInfo(kind, step.name, state, plain, scalars)


def runtime_scalars(graph, op_type, prefix, hyper):
    """(hyper with every float attribute a Scalar, {attribute: scalar name})."""
    if not isinstance(prefix, str):
        raise TypeError(f"add_optimizer: scalar_prefix must be a str, got {prefix!r}")
    existing = graph_scalars(graph)
    values = get_spec(op_type).attrs | hyper
    result, names = dict(hyper), {}
    for key, value in values.items():
        if isinstance(value, bool) or not isinstance(value, (Real, Scalar)):
            continue   # nesterov: a switch of the update's form, not a number
        scalar = value if isinstance(value, Scalar) else Scalar(prefix + key, float(value))
        if existing.get(scalar.name, scalar.default) != scalar.default:
            raise ValueError(f"add_optimizer: runtime scalar {scalar.name!r} already has "
                             f"default {existing[scalar.name]:g} in this graph, not "
                             f"{scalar.default:g}; pass scalar_prefix to name this "
                             "optimizer's scalars apart")
        result[key], names[key] = scalar, scalar.name
    return result, names


def check_pairs(params, grads):
    if len(params) != len(grads):
        raise ValueError(f"add_optimizer: {len(params)} parameters but {len(grads)} gradients")
    for param, gradient in zip(params, grads):
        if param.shape != gradient.shape or param.dtype != gradient.dtype:
            raise ValueError(f"add_optimizer: gradient {gradient.describe()} does not match "
                             f"parameter {param.describe()}")
        if not param.persistent:
            raise ValueError(f"add_optimizer: parameter {param.describe()} must be persistent "
                             "(its updated value must survive the execute)")
