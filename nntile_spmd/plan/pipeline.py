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
stage forwards micro-batch 1 while the next stage works on micro-batch 0. Or to
1F1B order (`OneFOneB`): each stage's own sequence of forwards and backwards,
merged into one walk (`one_f_one_b_order`). A
group is never moved before one it depends on (it reads what that one writes,
or writes what it reads or writes), so the reordered walk computes the same
values (sums adding into their output commute among themselves); a group reading
several micro-batches (a weight gradient summed over the batch) runs after the
phase's last micro-batch.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from typing import NamedTuple

from ..graph.logical_graph import PHASES
from .builder import PlanError

LAYER_NAME = re.compile(r"^[A-Za-z]+[._]?(\d+)(?:[._]|$)")
SHARED_ROLES = ("input", "constant")   # held by every stage that reads them
PHASE_RANK = {phase: rank for rank, phase in enumerate(PHASES)}
AFTER_ALL = math.inf   # the micro-batch slot of a group reading several


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


def batch_dims(graph, class_of, batch_class) -> dict:
    """{tensor name: its dim on the batch axis} for the tensors that have one."""
    result = {}
    for tensor in graph.tensors():
        dims = [d for d in range(tensor.ndim) if class_of[(tensor.name, d)] == batch_class]
        if dims:
            result[tensor.name] = dims[-1]
    return result


class Step(NamedTuple):
    """A stage's place in the 1F1B sequence."""

    phase: str         # "forward" or "backward"
    micro_batch: int


class Unit(NamedTuple):
    """One op's task groups of one micro-batch, with what orders it."""

    slot: tuple          # (phase rank, micro-batch): GPipe order, raised past its inputs
    chunk: list          # the task groups
    step: Step | None    # of a per-micro-batch unit, else None
    stage: int | None    # the stage of its output (None: held by every stage)
    deps: tuple          # indices of earlier units it must follow
    op: object           # the op whose groups these are


class OneFOneB(NamedTuple):
    """How a plan walks 1F1B: each tensor's stage, and whether a sum accumulated over
    micro-batches (a weight gradient) is split into one step group per micro-batch,
    so each micro-batch's activations are freed after its own backward. Not with a
    batch axis beside pp: each part would then be reduced over it separately."""

    stages: dict
    split_sums: bool


def micro_batch_order(lowered, dims, schedule=None):
    """(op, task groups) pairs in pipeline order (module docstring) from (op, groups)
    pairs in program order; `dims` as batch_dims(). Each list holds one op's groups of one
    micro-batch (the builders cost partial sums per list). GPipe order, or 1F1B with
    a OneFOneB `schedule`."""
    stages = schedule.stages if schedule else None
    if schedule and schedule.split_sums:
        lowered = ((op, split_accumulations(op, groups, dims)) for op, groups in lowered)
    units = pipeline_units(lowered, dims, stages or {})
    if stages is None:
        order = sorted(range(len(units)), key=lambda index: (units[index].slot, index))
        return [(units[index].op, units[index].chunk) for index in order]
    nstages = 1 + max(stage for stage in stages.values() if stage is not None)
    return [(units[index].op, units[index].chunk)
            for index in one_f_one_b_order(units, nstages)]


def split_accumulations(op, groups, dims) -> list:
    """`groups` with each group that accumulates (beta 1) over several micro-batches cut
    into one group per micro-batch: the same steps in the same order, each part adding
    into the output."""
    beta_attr = op.spec.beta_attr
    if beta_attr is None or op.attrs.get(beta_attr) != 1.0:
        return groups
    result = []
    for group in groups:
        parts = {}
        for step in group.steps:
            batches = {key[1][dims[key[0]]] for key in step.keys if key[0] in dims}
            parts.setdefault(max(batches, default=None), []).append(step)
        if len(parts) < 2 or None in parts:
            result.append(group)
            continue
        result += [group._replace(steps=tuple(steps), reads_output_first=True)
                   for steps in parts.values()]
    return result


def pipeline_units(lowered, dims, stages) -> list:
    """Units in program order with their slots and dependencies. Sums that add into
    their output (beta 1: gradient accumulation, a tied weight's two gradient
    contributions) commute with each other: they follow the last plain write and the
    reads before them, while a later read or plain write follows all of them."""
    writer, adders, readers = {}, defaultdict(list), defaultdict(list)   # unit indices
    units = []
    for op, groups in lowered:
        chunks = {}
        for group in groups:
            keys = {key for step in group.steps for key in step.keys} | set(group.outputs)
            batches = {key[1][dims[key[0]]] for key in keys if key[0] in dims}
            # a sum over micro-batches runs after the phase's last micro-batch, so
            # the next stage's last gradient is not held up behind it
            key = AFTER_ALL if len(batches) > 1 else max(batches, default=None)
            chunks.setdefault(key, []).append(group)
        adds = op.spec.beta_attr is not None and op.attrs.get(op.spec.beta_attr) == 1.0
        per_micro_batch = op.phase in ("forward", "backward")
        for micro_batch, chunk in chunks.items():
            writes = {key for group in chunk for key in group.outputs}
            reads = {key for group in chunk for step in group.steps
                     for key in step.keys} - writes
            deps = {writer[key] for key in reads | writes if key in writer}
            for key in reads:
                deps.update(adders[key])
            for key in writes:
                deps.update(readers[key])
                if not adds:
                    deps.update(adders[key])
            slot = max([(PHASE_RANK[op.phase], micro_batch or 0)]
                       + [units[index].slot for index in deps])
            index = len(units)
            for key in reads:
                readers[key].append(index)
            for key in writes:
                if adds:
                    adders[key].append(index)
                else:
                    writer[key], adders[key], readers[key] = index, [], []
            step = Step(op.phase, micro_batch) if per_micro_batch and \
                micro_batch not in (None, AFTER_ALL) else None
            units.append(Unit(slot, chunk, step, stages.get(chunk[0].outputs[0][0]),
                              tuple(sorted(deps)), op))
    return units


def one_f_one_b_steps(stage, nstages, micro_batches) -> list:
    """Stage `stage`'s sequence of Steps under 1F1B: nstages - 1 - stage
    forwards, then one forward and one backward in turn, then the last backwards."""
    warmup = min(nstages - 1 - stage, micro_batches)
    steps = [Step("forward", mb) for mb in range(warmup)]
    for mb in range(micro_batches - warmup):
        steps += [Step("forward", warmup + mb), Step("backward", mb)]
    return steps + [Step("backward", mb) for mb in range(micro_batches - warmup, micro_batches)]


def one_f_one_b_order(units, nstages) -> list:
    """Unit indices: each stage's per-micro-batch units in its 1F1B sequence, every
    other unit (no micro-batch, a sum over them, the optimizer) as soon as what it
    follows has run; among those ready, program order."""
    micro_batches = 1 + max((u.step.micro_batch for u in units if u.step), default=0)
    sequences = {stage: one_f_one_b_steps(stage, nstages, micro_batches)
                 for stage in range(nstages)}
    left = defaultdict(int)   # (stage, step) -> units not placed yet
    for unit in units:
        if unit.step is not None and unit.stage is not None:
            left[(unit.stage, unit.step)] += 1
    position = dict.fromkeys(sequences, 0)

    def current(stage):
        sequence = sequences[stage]
        while position[stage] < len(sequence) and not left[(stage, sequence[position[stage]])]:
            position[stage] += 1
        return sequence[position[stage]] if position[stage] < len(sequence) else None

    placed, order, pending = [False] * len(units), [], list(range(len(units)))
    while pending:
        waiting = []
        for index in pending:
            unit = units[index]
            sequenced = unit.step is not None and unit.stage is not None
            if all(placed[d] for d in unit.deps) and \
                    (not sequenced or current(unit.stage) == unit.step):
                placed[index] = True
                order.append(index)
                if sequenced:
                    left[(unit.stage, unit.step)] -= 1
            else:
                waiting.append(index)
        if len(waiting) == len(pending):
            names = sorted({units[i].chunk[0].op.name for i in waiting})[:3]
            raise PlanError(f"1F1B schedule: ops {names} cannot run in its order (a "
                            "backward step needs a later micro-batch's forward, e.g. a "
                            "sum over the batch); use the GPipe schedule")
        pending = waiting
    return order
