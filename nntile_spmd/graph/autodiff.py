"""Graph layer: reverse-mode autodiff that emits ordinary backward ops into the graph.

Each op's registry entry names its backward rule (OpSpec.backward): rule(op, ctx) adds
ops accumulating into ctx.grad(input) from ctx.grad(output). Gradients of `wrt` are
persistent tensors that accumulate (+=) across executes, so micro-batch accumulation
works; clear them after the optimizer step (models/optimizer.py's add_optimizer does).
"""

from __future__ import annotations

from collections.abc import Mapping

from . import ops
from .registry import REGISTRY, get_spec


class BackwardRules(Mapping):
    """{op type: backward rule} of the registered ops that have one, read from the
    registry entries at each access (a view: never a second table to keep in step)."""

    def __getitem__(self, op_type):
        rule = REGISTRY[op_type].backward
        if rule is None:
            raise KeyError(op_type)
        return rule

    def __iter__(self):
        return (name for name, spec in REGISTRY.items() if spec.backward is not None)

    def __len__(self):
        return sum(1 for _ in self)


BACKWARD_RULES = BackwardRules()


class GradContext:
    """Creates gradient tensors on first use (cleared, then accumulated into)."""

    def __init__(self, graph, needed, wrt_grads):
        self.graph, self.needed, self.grads = graph, needed, dict(wrt_grads)

    def needs(self, tensor) -> bool:
        return tensor.name in self.needed

    def grad(self, tensor):
        if tensor.name not in self.grads:
            grad = self.graph.tensor(tensor.shape, unique_name(self.graph, tensor.name + "_grad"),
                                     tensor.dtype)
            grad.grad_of = tensor.name
            # a structurally absent tile's entries are constants: their gradient is never read
            grad.causal_dims = tensor.causal_dims
            ops.clear(grad)
            self.grads[tensor.name] = grad
        return self.grads[tensor.name]

    def has_grad(self, tensor) -> bool:
        return tensor.name in self.grads

    def temp(self, like_name):
        return unique_name(self.graph, like_name)


def unique_name(graph, base: str) -> str:
    name, index = base, 1
    while graph.has_tensor(name):
        name, index = f"{base}{index}", index + 1
    return name


def grad(graph, loss, wrt, accumulate: bool = True, cotangents=None):
    """Add backward ops for d(sum of loss)/d(wrt); return the gradient tensors.

    The gradients are persistent outputs (role "gradient") added to on every
    execute; with accumulate=False they are cleared at the start of backward.
    With `cotangents` (one tensor per loss, `loss` then a list of tensors), the
    gradients are those of sum_i <loss_i, cotangent_i>: the cotangents, shaped like
    their outputs, are read when backward runs (ExecutableGraph.backward binds them).
    """
    wrt = list(wrt)
    losses = list(loss) if cotangents is not None else [loss]
    seeds = check_cotangents(losses, cotangents)
    forward_ops = graph.ops()
    needed = reaching(forward_ops, {t.name for t in wrt}, forward=True) & \
        reaching(forward_ops, {t.name for t in losses}, forward=False)
    with graph.phase("backward"):
        wrt_grads = {}
        for tensor in wrt:
            grad_tensor = graph.tensor(tensor.shape, unique_name(graph, tensor.name + "_grad"),
                                       tensor.dtype, persistent=True)
            grad_tensor.grad_of = tensor.name
            grad_tensor.mark_output()
            if not accumulate:
                ops.clear(grad_tensor)
            wrt_grads[tensor.name] = grad_tensor
        context = GradContext(graph, needed, wrt_grads)
        for output, cotangent in zip(losses, seeds):
            if cotangent is None:
                seed = graph.tensor(output.shape, unique_name(graph, output.name + "_grad"),
                                    output.dtype)
                ops.fill(seed, 1.0)
                context.grads[output.name] = seed
            else:   # a copy: the rules accumulate into and rewrite the seed in place
                ops.add_inplace(1.0, cotangent, 1.0, context.grad(output))
        for op in reversed(forward_ops):
            if any(context.has_grad(t) for t in op.outputs) and \
                    any(context.needs(t) for t in op.inputs):
                rule = get_spec(op.op_type).backward
                if rule is None:
                    raise NotImplementedError(f"grad: op {op.name} ({op.op_type}) has no "
                                              "backward rule")
                rule(op, context)
    return [wrt_grads[t.name] for t in wrt]


def check_cotangents(losses, cotangents) -> list:
    """One cotangent (or None: the loss's seed of ones) per loss, shaped like it."""
    if cotangents is None:
        return [None]
    cotangents = list(cotangents)
    if len(cotangents) != len(losses):
        raise ValueError(f"grad: {len(losses)} output(s) but {len(cotangents)} cotangent(s)")
    for output, cotangent in zip(losses, cotangents):
        if (cotangent.shape, cotangent.dtype) != (output.shape, output.dtype):
            raise ValueError(f"grad: cotangent {cotangent.describe()} must be shaped like "
                             f"{output.describe()}")
    return cotangents


def reaching(op_list, start: set, forward: bool) -> set:
    """Tensor names reachable from `start` along ops (forward or backward)."""
    reached = set(start)
    for op in (op_list if forward else reversed(op_list)):
        sources, targets = (op.inputs, op.outputs) if forward else (op.outputs, op.inputs)
        if any(t.name in reached for t in sources):
            reached.update(t.name for t in targets)
    return reached
