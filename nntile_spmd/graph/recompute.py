"""Graph layer: activation recomputation (gradient checkpointing) as a graph transform.

`recompute(graph, segments)` works on a graph that already has its backward ops
(nt.grad). Per segment (a run of forward ops, e.g. one transformer block), the
values the segment produces and backward reads are no longer kept from forward to
backward: right before the first backward op that needs one of them, copies of the
segment's ops are inserted (phase "backward", named `<op>_recompute`) that compute
them again into new tensors (`<tensor>_recompute`) from what the segment reads from
outside (its input, the parameters), and the backward ops read those copies. The
originals then die in forward, after their last forward use. A value that later
forward ops read (the segment's output, the next segment's input) is kept as it is:
it is the checkpoint. The same ops on the same values give bitwise the same numbers.
The plan counts the copies' FLOPs like any op's; `recomputed_ops(graph)` names them.
"""

from __future__ import annotations

SUFFIX = "_recompute"


def recompute(graph, segments) -> dict:
    """Recompute each segment's activations in backward; returns {segment index:
    [names of the recomputed tensors]}. A segment is a list of forward ops (OpNodes or
    op names) or a prefix string: the forward ops whose first output's name starts
    with it (GPT-2's block 3: "h3_")."""
    ops = graph.ops()
    if not any(op.phase == "backward" for op in ops):
        raise ValueError(f"recompute: graph {graph.name!r} has no backward ops; call "
                         "nt.grad(...) before recompute(...)")
    done = {}
    for index, segment in enumerate(segments):
        members = segment_ops(graph, segment, index)
        done[index] = recompute_segment(graph, members, index)
    return done


def recomputed_ops(graph) -> dict:
    """{name of an inserted copy: name of the forward op it recomputes}."""
    names = {op.name for op in graph.ops()}
    return {op.name: op.name[:-len(SUFFIX)] for op in graph.ops()
            if op.phase == "backward" and op.name.endswith(SUFFIX)
            and op.name[:-len(SUFFIX)] in names}


def segment_ops(graph, segment, index) -> list:
    forward = [op for op in graph.ops() if op.phase == "forward"]
    if isinstance(segment, str):
        members = [op for op in forward if op.outputs and op.outputs[0].name.startswith(segment)]
    else:
        names = {item if isinstance(item, str) else item.name for item in segment}
        members = [op for op in forward if op.name in names]
        missing = names - {op.name for op in members}
        if missing:
            raise ValueError(f"recompute: segment {index} names ops that are not forward ops "
                             f"of graph {graph.name!r}: {sorted(missing)[:5]}")
    if not members:
        raise ValueError(f"recompute: segment {index} ({segment!r}) matches no forward op "
                         f"of graph {graph.name!r}")
    return members


def recompute_segment(graph, members, index) -> list:
    ops = graph.ops()
    position = {op.name: i for i, op in enumerate(ops)}
    inside = {op.name for op in members}
    produced = {t.name: t for op in members for t in op.outputs}
    read_outside = {t.name for op in ops if op.phase == "forward" and op.name not in inside
                    for t in op.reads}
    backward = [op for op in ops if op.phase == "backward"]
    backward_reads = {t.name for op in backward for t in op.reads}
    wanted = {name for name, t in produced.items() if not t.keeps_storage
              and name not in read_outside and name in backward_reads}
    if not wanted:
        return []
    # every tensor of the segment needed to compute `wanted` again (checkpoints excluded)
    needed, replay = set(wanted), set()
    changed = True
    while changed:
        changed = False
        for op in members:
            if op.name not in replay and any(t.name in needed for t in op.outputs):
                replay.add(op.name)
                changed = True
                needed.update(t.name for t in op.outputs)   # a copy writes copies only
                needed.update(t.name for t in op.reads if t.name in produced
                              and t.name not in read_outside and not t.keeps_storage)
    replayed = [op for op in members if op.name in replay]
    first_reader = min(position[op.name] for op in backward
                       if any(t.name in needed for t in op.reads + op.outputs))
    check_inputs_unchanged(graph, ops, replayed, needed, first_reader, position, index)
    copies = {name: copy_tensor(graph, produced[name]) for name in sorted(needed)}
    rename = dict(copies)
    for op in ops[first_reader:]:
        op.inputs = tuple(rename.get(t.name, t) for t in op.inputs)
        op.outputs = tuple(rename.get(t.name, t) for t in op.outputs)
    inserted = []
    for op in replayed:
        inserted.append(graph.add_op(op.op_type, [rename.get(t.name, t) for t in op.inputs],
                                     [rename[t.name] for t in op.outputs], op.attrs,
                                     name=op.name + SUFFIX, phase="backward"))
    insert_ops(graph, inserted, first_reader)
    return sorted(needed)


def check_inputs_unchanged(graph, ops, replayed, needed, first_reader, position, index):
    """A copy reads what its op read: no op between them may write such a tensor."""
    for op in replayed:
        for tensor in op.reads:
            if tensor.name in needed:
                continue
            writer = next((later for later in ops[position[op.name] + 1:first_reader]
                           if any(t.name == tensor.name for t in later.outputs)), None)
            if writer is not None:
                raise ValueError(f"recompute: segment {index} of graph {graph.name!r}: op "
                                 f"{op.name} reads {tensor.name}, which {writer.name} "
                                 "overwrites before backward; recomputing it would read "
                                 "another value (end the segment before that op)")


def copy_tensor(graph, tensor):
    copy = graph.tensor(tensor.shape, tensor.name + SUFFIX, tensor.dtype)
    copy.parallel_dim, copy.causal_dims = tensor.parallel_dim, tensor.causal_dims
    return copy


def insert_ops(graph, inserted, index):
    """Move the just appended ops to program position `index` (ids follow positions)."""
    ops = graph._ops
    del ops[len(ops) - len(inserted):]
    ops[index:index] = inserted
    for number, op in enumerate(ops):
        op.id = number
