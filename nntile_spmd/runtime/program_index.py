"""Runtime layer: what an execute needs to know about a rank's program beyond its
instructions, derived once per (phases, rank) instead of once per execute.

The kernel table (with the fused chains the program calls) and the positions of its
RECVs depend only on which instructions the program has, never on the runtime
scalars' values (those change EXEC params in place, scalars.ResolvedProgram), so both
stay valid for the life of the compiled graph. Scanning a program costs ~0.3 us per
instruction for each (benchmarks/bench_executor.py), as much as running a tiny task.
"""

from __future__ import annotations

from typing import NamedTuple

from ..plan.memory import recv_positions
from .fused_kernels import kernel_table


class ProgramIndex(NamedTuple):
    kernels: dict      # kernel name -> callable, fused chains included
    positions: list    # program indices of the RECVs, in order


def program_index(cache: dict, key, device, program, fused_cache: dict) -> ProgramIndex:
    """The index of `program` (the resolved program of `key` = (phases, rank))."""
    entry = cache.get(key)
    if entry is None or entry.program is not program:
        entry = cache[key] = IndexEntry(ProgramIndex(
            kernel_table(device, program, fused_cache), recv_positions(program)), program)
    return entry.value


class IndexEntry(NamedTuple):
    value: ProgramIndex
    program: list      # the program it describes (ResolvedProgram keeps one per key)
