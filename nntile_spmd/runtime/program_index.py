"""Runtime layer: what an execute needs to know about a rank's program beyond its
instructions, derived once per (phases, rank) instead of once per execute.

The kernel table (with the fused chains the program calls), the positions of its
RECVs and the tile slots depend only on which instructions the program has, never
on the runtime scalars' values (those give the EXECs new params in a resolved copy
of the program at the same positions, scalars.ResolvedProgram), so all stay valid for
the life of the compiled graph.

Tile slots: every tile key of the program gets an integer, and each instruction its
operands as slots, so the executor keeps its tiles in a list indexed by slot instead
of a dict keyed by (tensor, coord) tuples (CPython does not cache tuple hashes:
every look-up hashed the key again). Tiles that live across executes ("resident":
not both created and freed inside the program) move between the tile store's dict
and the slot list at the start and end of an execute; the others never touch it.
"""

from __future__ import annotations

from typing import NamedTuple

from ..plan.instructions import Evict, Exec, Free, Prefetch, Recv, Send
from ..plan.memory import recv_positions
from .finite_check import wrap_kernels
from .fused_kernels import kernel_table


class ProgramIndex(NamedTuple):
    kernels: dict      # kernel name -> callable, fused chains included
    positions: list    # program indices of the RECVs, in order
    keys: list         # slot -> tile key
    metas: list        # slot -> TileMeta
    kinds: list        # slot -> storage kind (one per (shape, dtype)): spare lists
    kind_specs: list   # storage kind -> (shape, dtype name)
    operands: list     # pc -> the instruction's operands as slots (see slot_operands)
    resident: list     # slots loaded from / stored to the tile store's dict
    op_names: list     # op id -> op name (EXEC ops and RECV/SEND consumers)
    scratch: dict      # what executors derive from the index once (executor.py)


def program_index(cache: dict, key, device, program, fused_cache: dict,
                  meta, check_finite=False) -> ProgramIndex:
    """The index of `program` (the resolved program of `key` = (phases, rank, whether
    the kernels are checked for non-finite outputs: finite_check.py))."""
    entry = cache.get(key)
    if entry is None or entry.program is not program:
        kernels = kernel_table(device, program, fused_cache)
        value = build_index(program, kernels, meta)
        if check_finite:
            value = value._replace(operands=wrap_kernels(value.operands, device.xp))
        entry = cache[key] = IndexEntry(value, program)
    return entry.value


class IndexEntry(NamedTuple):
    value: ProgramIndex
    program: list      # the program it describes (ResolvedProgram keeps one per key)


def build_index(program, kernels, meta) -> ProgramIndex:
    """Slots, operands and resident set of `program` (one pass)."""
    slot_of, keys, op_id_of, op_names = {}, [], {}, []
    first, last = {}, {}       # slot -> kind of its first / last touch

    def slot(key, touch):
        number = slot_of.get(key)
        if number is None:
            number = slot_of[key] = len(keys)
            keys.append(key)
            first[number] = touch
        last[number] = touch
        return number

    def op_id(name):
        number = op_id_of.get(name)
        if number is None:
            number = op_id_of[name] = len(op_names)
            op_names.append(name)
        return number

    operands = []
    for instruction in program:
        kind = type(instruction)
        if kind is Exec:
            keys_, writes = instruction.keys, instruction.writes
            inputs = keys_[:len(keys_) - len(writes)]
            in_slots = tuple(slot(k, "read") for k in inputs)
            out_slots = tuple(slot(k, "read" if k in inputs else "create") for k in writes)
            operands.append((kernels[instruction.kernel], in_slots + out_slots, in_slots,
                             out_slots, op_id(instruction.op_name)))
        elif kind is Recv or kind is Send:
            touch = "create" if kind is Recv else "read"
            operands.append((slot(instruction.key, touch), op_id(instruction.consumer)))
        elif kind is Prefetch:
            operands.append(slot(instruction.key, "create"))
        elif kind is Free or kind is Evict:
            operands.append(slot(instruction.key, "free"))
        else:
            raise TypeError(f"the executor has no rule for instruction {instruction!r}")
    metas = [meta[key] for key in keys]
    kind_of, kinds, kind_specs = {}, [], []
    for tile_meta in metas:
        spec = (tile_meta.shape, tile_meta.dtype)
        number = kind_of.get(spec)
        if number is None:
            number = kind_of[spec] = len(kind_specs)
            kind_specs.append(spec)
        kinds.append(number)
    resident = [number for number in range(len(keys))
                if first[number] != "create" or last[number] != "free"]
    return ProgramIndex(kernels, recv_positions(program), keys, metas, kinds, kind_specs,
                        operands, resident, op_names, {})
