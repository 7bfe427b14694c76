"""Plan layer: fuse chains of elementwise EXECs on one tile into one EXEC.

A pass over one rank's finished program (FREEs placed). An elementwise EXEC (its
kernel has an element rule in nntile_kernels.fused_rules, every tile of one shape
and float dtype, plain-number parameters) joins the EXEC that last touched any of
its tiles when that one is elementwise too: no instruction in between touches its
tiles, so moving it up changes no value. The joined EXEC is one task of a fused
kernel that reads each tile once. A tile that the chain writes first (reading no
old value) and that nothing but its FREE touches after the chain never becomes a
tile at all: it lives in a register of the fused loop, and its allocation and FREE
leave the program (the planned and measured peaks drop alike).

A `clear` whose tile is next written whole by an accumulating kernel (a gradient's
first gemm with beta 1) is dropped and that kernel runs with beta 0 instead
(fold_clears): no pass zero-filling a buffer that is overwritten anyway.

The fused program prints like any other (`cg.program(r)`): the kernel name lists
the chain's kernels and slots, the op name its ops joined by "+".
"""

from __future__ import annotations

from nntile_kernels.fused_rules import ELEMENT_RULES, Step, chain_name

from .instructions import Exec, Free
from .kernel_params import KernelParams

FUSED_DTYPES = ("fp32", "fp64")
# Kernels that write their whole output from the inputs alone when beta == 0.
BETA_OVERWRITES = ("gemm", "sum_fiber", "sumprod_fiber", "sum_slice", "sumprod_slice")
MAX_CHAIN = 8     # a longer loop body only spills registers


def fusible(instruction, meta) -> bool:
    """Is this EXEC an elementwise kernel the fused loops can run?"""
    if type(instruction) is not Exec or instruction.kernel not in ELEMENT_RULES:
        return False
    rule = ELEMENT_RULES[instruction.kernel]
    if set(instruction.params) != set(rule.params):
        return False
    if not all(type(value) in (int, float) for value in instruction.params.values()):
        return False      # a runtime scalar: its value is filled in at execute time
    first = meta[instruction.keys[0]]
    return first.dtype in FUSED_DTYPES and all(
        meta[key].shape == first.shape and meta[key].dtype == first.dtype
        for key in instruction.keys)


class Chain:
    """EXECs being fused: their steps over tile keys, in program order."""

    def __init__(self, instruction):
        self.parts = [instruction]

    def touches(self):
        return {key for part in self.parts for key in part.keys}

    def to_exec(self, temporaries=frozenset()):
        """The fused EXEC; `temporaries` are tile keys kept in registers only."""
        if len(self.parts) == 1 and not temporaries:
            return self.parts[0]
        read_first, written, order = [], [], {}
        for part in self.parts:
            n_in = len(part.keys) - len(part.writes)
            reads = list(part.keys[:n_in])
            if ELEMENT_RULES[part.kernel].reads_output:
                reads += part.writes
            for key in reads:           # a loop: a step may read one tile twice (x * x)
                if key not in written and key not in read_first:
                    read_first.append(key)
            for key in part.writes:
                if key not in written:
                    written.append(key)
        inputs = [k for k in read_first if k not in written and k not in temporaries]
        outputs = [k for k in written if k not in temporaries]
        for key in inputs + outputs:
            order.setdefault(key, len(order))
        temp_names = {key: f"t{i}" for i, key in enumerate(sorted(temporaries))}
        slot = {**order, **temp_names}
        steps, params = [], {}
        for index, part in enumerate(self.parts):
            n_in = len(part.keys) - len(part.writes)
            steps.append(Step(part.kernel, tuple(slot[k] for k in part.keys[:n_in]),
                              tuple(slot[k] for k in part.writes)))
            params.update({f"s{index}_{name}": value for name, value in part.params.items()})
        return Exec(chain_name(steps), tuple(inputs + outputs),
                    tuple(k for k in inputs + outputs if k in read_first),
                    tuple(outputs), KernelParams(params), sum(p.flops for p in self.parts),
                    "+".join(p.op_name for p in self.parts))

    def written_first(self):
        """Keys the chain writes before (or without) reading their old value."""
        seen, first = set(), set()
        for part in self.parts:
            n_in = len(part.keys) - len(part.writes)
            reads = set(part.keys[:n_in])
            if ELEMENT_RULES[part.kernel].reads_output:
                reads |= set(part.writes)
            for key in part.writes:
                if key not in seen and key not in reads:
                    first.add(key)
            seen |= reads | set(part.writes)
        return first


def fuse_program(program, meta) -> list:
    """`program` with its elementwise chains fused (see the module docstring)."""
    out, last_touch = [], {}     # last_touch: key -> index in `out`
    for instruction in fold_clears(program):
        keys = touched(instruction)
        if fusible(instruction, meta):
            previous = max((last_touch.get(key, -1) for key in keys), default=-1)
            target = out[previous] if previous >= 0 else None
            if type(target) is Chain and len(target.parts) < MAX_CHAIN:
                target.parts.append(instruction)
                last_touch.update(dict.fromkeys(keys, previous))
                continue
            instruction = Chain(instruction)
        out.append(instruction)
        last_touch.update(dict.fromkeys(keys, len(out) - 1))
    return eliminate_temporaries(out)


def eliminate_temporaries(items) -> list:
    """Chains to EXECs; a key written first by a chain, untouched before it and touched
    only by its FREE after it, becomes a register of the fused loop."""
    first_touch, next_touch = {}, {}   # key -> index; (index, key) -> next index
    last = {}
    for index, item in enumerate(items):
        keys = item.touches() if type(item) is Chain else touched(item)
        for key in keys:
            first_touch.setdefault(key, index)
            if key in last:
                next_touch[(last[key], key)] = index
            last[key] = index
    dropped, result = set(), []
    for index, item in enumerate(items):
        if type(item) is not Chain:
            if index not in dropped:
                result.append(item)
            continue
        temporaries = set()
        if len(item.parts) > 1:
            for key in item.written_first():
                after = next_touch.get((index, key))
                if (first_touch[key] == index and after is not None
                        and type(items[after]) is Free):
                    temporaries.add(key)
                    dropped.add(after)
        result.append(item.to_exec(frozenset(temporaries)))
    return result


def fold_clears(program) -> list:
    """Drop a `clear` of a tile whose next toucher overwrites all of it through a beta
    parameter: beta 1 (add to zeros) becomes beta 0 (the kernel does not read the
    tile). The same values (x + 0 == x), one pass over the tile less. Only kernels
    whose only use of the tile is that output (never also an input) qualify."""
    next_touch, last = {}, {}
    for index, instruction in enumerate(program):
        for key in touched(instruction):
            if key in last:
                next_touch[(last[key], key)] = index
            last[key] = index
    result, rewritten = [], {}
    for index, instruction in enumerate(program):
        instruction = rewritten.pop(index, instruction)
        if type(instruction) is Exec and instruction.kernel == "clear":
            key = instruction.writes[0]
            after = next_touch.get((index, key))
            target = program[after] if after is not None else None
            if (type(target) is Exec and target.kernel in BETA_OVERWRITES
                    and target.writes == (key,) and key not in target.keys[:-1]
                    and target.params.get("beta") == 1.0 and after not in rewritten):
                rewritten[after] = target._replace(params=target.params.with_values(beta=0.0))
                continue
        result.append(instruction)
    return result


def touched(instruction):
    return instruction.keys if type(instruction) is Exec else (instruction.key,)
