"""Graph layer, optimizers family: builders and registry entries of the PyTorch-exact
SGD, Adam and AdamW steps (no gradient passes through an optimizer step). The kernels'
formulas: nntile_kernels/formulas/optimizers.py.
"""

from __future__ import annotations

from .apply import apply
from .checks import numel, require_float
from .registry import OpSpec, add_entries, always, labels, op_error

ENTRIES: list[OpSpec] = []   # the family's registry entries, in writing order
add_spec = ENTRIES.append   # each add_spec(OpSpec(...)) below joins ENTRIES


def sgd_step(step, grad, param, velocity, lr=1e-2, momentum=0.0, weight_decay=0.0,
             dampening=0.0, nesterov=False):
    """PyTorch SGD update of param (and velocity) at 1-based step `step`."""
    return apply("sgd_step", [step, grad], [param, velocity], lr=lr, momentum=momentum,
                 weight_decay=weight_decay, dampening=dampening, nesterov=nesterov)


def adam_step(step, grad, param, m, v, lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8,
              weight_decay=0.0):
    """PyTorch Adam update of param, m, v at 1-based step `step`."""
    return apply("adam_step", [step, grad], [param, m, v], lr=lr, beta1=beta1,
                 beta2=beta2, eps=eps, weight_decay=weight_decay)


def adamw_step(step, grad, param, m, v, lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8,
               weight_decay=1e-2):
    """PyTorch AdamW update (decoupled weight decay) of param, m, v."""
    return apply("adamw_step", [step, grad], [param, m, v], lr=lr, beta1=beta1,
                 beta2=beta2, eps=eps, weight_decay=weight_decay)


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
    add_spec(OpSpec(name=optimizer, kernel=optimizer, num_inputs=2, num_outputs=outputs,
                    infer=optimizer_infer, axes=optimizer_axes,
                    attrs=OPTIMIZER_ATTRS[optimizer], reads_output=always,
                    flops=lambda attrs, i, o: 10 * numel(i[1]), differentiable=False))


def register(registry: dict) -> None:
    """Add the optimizers entries to `registry` (graph/families.py calls it)."""
    add_entries(registry, ENTRIES)

