"""Plan layer: pipeline parallelism (the `pp` preset and the pp mesh axis).

Stages. Consecutive layers form a stage, and every tensor lives on the ranks of
its layer's stage. A tensor's layer is read from its name: a word, an optional
`.` or `_`, the layer index, then `_`, `.` or the end (`h3_q_weight` in GPT-2 and
Llama, `w3`/`a3_grad` in the MLP, `layers.3.mlp` or `h.3.attn` in HF-style
names), so a custom graph gets stages by naming its tensors that way. A tensor
without an index takes its forward tensor's layer (a gradient, `grad_of`), else
the layer of the ops around its first use: the last op before it that touches a
layer's tensor, or the first one after it for tensors used before any layer
(embeddings, inputs). The gradient of an activation goes with the last layer that
reads the activation (whose backward computes it). Graph inputs, constants and
scalars (an optimizer's step count) read on several stages are held by all of them
(every rank binds the whole input anyway).

Micro-batches. The batch axis' tiles are the micro-batches. `micro_batch_order`
reorders the task groups the builders walk from op-major (one op for all tiles,
then the next op) to GPipe order: per phase, micro-batch 0 through all its ops,
then micro-batch 1, ...; a rank's program is its subsequence of that walk, so a
stage forwards micro-batch 1 while the next stage works on micro-batch 0. A
group is never moved before one it depends on (it reads what that one writes,
or writes what it reads or writes), so the reordered walk computes the same
values; a group reading several micro-batches (a weight gradient summed over the
batch) waits for the last of them.
"""

from __future__ import annotations

import re
from collections import defaultdict

from ..graph.logical_graph import PHASES

LAYER_NAME = re.compile(r"^[A-Za-z]+[._]?(\d+)(?:[._]|$)")
SHARED_ROLES = ("input", "constant")   # held by every stage that reads them
PHASE_RANK = {phase: rank for rank, phase in enumerate(PHASES)}


def named_layer(name):
    """The layer index in a tensor name (see the module docstring), or None."""
    match = LAYER_NAME.match(name)
    return int(match.group(1)) if match else None


def tensor_layers(graph) -> dict:
    """{tensor name: layer index} for every tensor of `graph`."""
    tensors = {t.name: t for t in graph.tensors()}
    direct = {}
    for name, tensor in tensors.items():
        root, seen = tensor, set()
        while named_layer(root.name) is None and root.grad_of in tensors \
                and root.name not in seen:
            seen.add(root.name)
            root = tensors[root.grad_of]
        direct[name] = (named_layer(root.name), root.name)
    ops = graph.ops()
    op_layers = [op_layer(op, direct) for op in ops]
    if all(layer is None for layer in op_layers):
        raise ValueError(f"pipeline parallelism: graph {graph.name!r} has no layer "
                         "structure: no tensor name carries a layer index (name tensors "
                         "like 'h3_out', 'w3' or 'layers.3.out' to assign layers to stages)")
    around = layers_around(op_layers)
    first_use = {}
    for position, op in enumerate(ops):
        for tensor in op.inputs + op.outputs:
            first_use.setdefault(tensor.name, position)
    layers = {}
    for name, (layer, root) in direct.items():
        if layer is None:
            layer = around[first_use.get(root, first_use.get(name, 0))]
        layers[name] = layer
    # the gradient of an activation is computed by the backward of the ops that read
    # the activation: it lives with the last of them, so a stage boundary is crossed
    # by the activation forward and by its gradient back, nothing else
    activations, readers = set(), defaultdict(list)
    for position, op in enumerate(ops):
        if op.phase == "forward":
            activations.update(t.name for t in op.outputs)
            for tensor in op.inputs:
                readers[tensor.name].append(around[position])
    for tensor in tensors.values():
        if tensor.grad_of in activations and readers[tensor.grad_of]:
            layers[tensor.name] = max(readers[tensor.grad_of])
    return layers


def op_layer(op, direct):
    """The layer of an op's named outputs, else of its named inputs (highest), else None."""
    for tensors in (op.outputs, op.inputs):
        layers = [direct[t.name][0] for t in tensors if direct[t.name][0] is not None]
        if layers:
            return max(layers)
    return None


def layers_around(op_layers) -> list:
    """Per op position: the last known op layer at or before it, else the first after."""
    first = next(layer for layer in op_layers if layer is not None)
    result, current = [], first
    for layer in op_layers:
        current = current if layer is None else layer
        result.append(current)
    return result


def tensor_stages(graph, nstages) -> dict:
    """{tensor name: stage} with consecutive layers on each stage (the first stages get
    one layer more when the layers do not divide evenly), None for a tensor held by
    every stage (an input, constant or scalar read on several)."""
    layers = tensor_layers(graph)
    ordered = sorted(set(layers.values()))
    if len(ordered) < nstages:
        raise ValueError(f"pipeline parallelism: graph {graph.name!r} has {len(ordered)} "
                         f"layer(s) {ordered} for {nstages} stages; each stage needs a layer")
    stage_of_layer = {layer: index * nstages // len(ordered)
                      for index, layer in enumerate(ordered)}
    stages = {name: stage_of_layer[layer] for name, layer in layers.items()}
    readers = defaultdict(set)
    for op in graph.ops():
        stage = stages[op.outputs[0].name] if op.outputs else None
        for tensor in op.inputs:
            readers[tensor.name].add(stage)
    for tensor in graph.tensors():
        shared = tensor.role in SHARED_ROLES or tensor.ndim == 0
        if shared and len(readers[tensor.name]) > 1:
            stages[tensor.name] = None
    return stages


def batch_dims(plan, batch_class) -> dict:
    """{tensor name: its dim on the batch axis} for the tensors that have one."""
    result = {}
    for tensor in plan.graph.tensors():
        dims = [d for d in range(tensor.ndim) if plan.class_of[(tensor.name, d)] == batch_class]
        if dims:
            result[tensor.name] = dims[-1]
    return result


def micro_batch_order(lowered, dims):
    """Task group lists in GPipe order (module docstring) from (op, groups) pairs in
    program order; `dims` as batch_dims(). Each list holds one op's groups of one
    micro-batch (the builders cost partial sums per list)."""
    written_at, read_at, units = {}, {}, []
    for op, groups in lowered:
        chunks = {}
        for group in groups:
            keys = {key for step in group.steps for key in step.keys} | set(group.outputs)
            batches = {key[1][dims[key[0]]] for key in keys if key[0] in dims}
            chunks.setdefault(max(batches, default=0), []).append(group)
        phase = PHASE_RANK[op.phase]
        for micro_batch, chunk in chunks.items():
            writes = {key for group in chunk for key in group.outputs}
            reads = {key for group in chunk for step in group.steps
                     for key in step.keys} - writes
            slot = max([(phase, micro_batch)]
                       + [written_at[key] for key in reads | writes if key in written_at]
                       + [read_at[key] for key in writes if key in read_at])
            for key in reads:
                read_at[key] = max(read_at.get(key, slot), slot)
            for key in writes:
                written_at[key] = slot
            units.append((slot, len(units), chunk))
    units.sort(key=lambda unit: unit[:2])
    return [chunk for _, _, chunk in units]
