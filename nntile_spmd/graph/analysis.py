"""Graph layer: analysis of a LogicalGraph (op and parameter counts, FLOP and memory
estimates, dead ops). Reads the graph only; imports nothing from plan/ or runtime/
and no numba, cupy or mpi4py.

Definitions (the numbers are for the whole logical graph, before tiling):

- parameters: tensors whose role is "parameter" (persistent, requires_grad, not
  external).
- FLOPs: the sum over ops of the op's registered cost ``spec.flops``; symbolic
  shapes must be bound first (``g.bind({...})``), since a guess would mislead.
- activation memory: bytes of every tensor that some op writes and that is neither
  persistent nor external (forward activations, temporaries, gradients that are
  not kept, outputs), each counted once as if all were alive together. It is an
  upper bound on the working set; the plan's memory analysis, which frees buffers
  after their last use, gives the real per-rank peak.
- dead op: an op none of whose written values reach the end of execute() in a
  tensor marked output or a persistent tensor, directly or through later ops that
  read them. Persistent tensors are kept state, so an op updating a parameter is
  live. Values are followed in program order: an op whose result is overwritten
  (by an op that does not accumulate into it) before anything reads it is dead too.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from .registry import describe_all

if TYPE_CHECKING:
    from .logical_graph import LogicalGraph, OpNode
    from .tensor import TensorNode


def num_operations(graph: LogicalGraph) -> int:
    """Number of ops in the graph."""
    return len(graph.ops())


def parameters(graph: LogicalGraph) -> list[TensorNode]:
    """Tensors whose role is "parameter", in creation order."""
    return [tensor for tensor in graph.tensors() if tensor.role == "parameter"]


def num_parameters(graph: LogicalGraph) -> int:
    """Elements of all parameter tensors (their shapes must be concrete)."""
    return sum(tensor.size for tensor in parameters(graph))


def estimate_parameter_memory(graph: LogicalGraph) -> int:
    """Bytes of all parameter tensors."""
    return sum(tensor.nbytes for tensor in parameters(graph))


def activation_tensors(graph: LogicalGraph) -> list[TensorNode]:
    """Tensors written by some op that are neither persistent nor external."""
    written = {}
    for op in graph.ops():
        for tensor in op.outputs:
            if not (tensor.persistent or tensor.external):
                written.setdefault(tensor.id, tensor)
    return list(written.values())


def estimate_activation_memory(graph: LogicalGraph) -> int:
    """Bytes of the activation tensors, all counted as alive at once (see module doc)."""
    return sum(tensor.nbytes for tensor in activation_tensors(graph))


def op_flops(op: OpNode) -> int:
    """FLOPs of one op from its registered cost rule; raises on symbolic shapes."""
    symbolic = [tensor for tensor in op.inputs + op.outputs if tensor.is_symbolic]
    if symbolic:
        raise ValueError(f"{op.name}: cannot count FLOPs of symbolic shapes "
                         f"({describe_all(symbolic)}); bind the symbols with "
                         "g.bind({...}) first")
    in_shapes = [tensor.shape for tensor in op.inputs]
    out_shapes = [tensor.shape for tensor in op.outputs]
    return int(op.spec.flops(op.attrs, in_shapes, out_shapes))


def estimate_flops(graph: LogicalGraph) -> int:
    """FLOPs of one execution of the whole graph."""
    return sum(op_flops(op) for op in graph.ops())


def dead_ops(graph: LogicalGraph, ops=None, observed=None) -> list[OpNode]:
    """Ops whose results reach no output and no persistent tensor, in program order.

    `ops` (default: all) is the op sequence one execute runs; `observed` (default:
    outputs and persistent tensors) the ids of tensors whose final values count.
    """
    # Ids of tensors whose current value (at this point of the backward sweep) is
    # still observed: at the end of execute() that is outputs and kept state.
    needed = set(observed) if observed is not None else \
        {tensor.id for tensor in graph.tensors() if tensor.is_output or tensor.persistent}
    dead = []
    for op in reversed(graph.ops() if ops is None else ops):
        if not any(tensor.id in needed for tensor in op.outputs):
            dead.append(op)
            continue
        if not op.spec.reads_output(op.attrs):
            # The op overwrites its outputs, so their earlier values are unobserved
            # unless the op reads them as inputs (in-place ops), added back below.
            needed.difference_update(tensor.id for tensor in op.outputs)
        needed.update(tensor.id for tensor in op.reads)
    return dead[::-1]


def summary(graph: LogicalGraph) -> str:
    """A few lines describing the graph: counts by phase, type and role, and estimates."""
    ops, tensors = graph.ops(), graph.tensors()
    lines = [f"LogicalGraph {graph.name!r}: {len(tensors)} tensors, {len(ops)} ops",
             "  ops by phase: " + counts(op.phase for op in ops),
             "  ops by type: " + counts(op.op_type for op in ops),
             "  tensors by role: " + counts(tensor.role for tensor in tensors)]
    symbols = graph.symbols()
    if symbols:
        lines.append(f"  symbolic dims {sorted(symbols)}: bind them for sizes and estimates")
    else:
        parameter_line = (f"  parameters: {len(parameters(graph))} tensors, "
                          f"{num_parameters(graph):,} elements, "
                          f"{estimate_parameter_memory(graph):,} bytes")
        activation_line = (f"  activations: {estimate_activation_memory(graph):,} bytes "
                           "(written by ops, not persistent, not external; no frees)")
        lines += [parameter_line, activation_line,
                  f"  FLOPs per execute: {estimate_flops(graph):,}"]
    dead = dead_ops(graph)
    lines.append("  dead ops: " + (", ".join(op.name for op in dead) if dead else "none"))
    return "\n".join(lines)


def counts(values) -> str:
    """'a 2, b 1' in order of first appearance, or 'none'."""
    counter = Counter(values)
    return ", ".join(f"{key} {count}" for key, count in counter.items()) or "none"
