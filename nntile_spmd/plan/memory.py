"""Plan layer: FREE placement and the exact memory timeline of a rank's program.

The executor follows the same rules (receives posted `window` RECVs ahead, a
received tile replaces an older copy, an EXEC allocates the tiles it writes
first), so the peak computed here is the peak the runtime measures.
"""

from __future__ import annotations

import bisect
from typing import NamedTuple

from .instructions import Evict, Exec, Free, Prefetch, Recv, new_tuple



class TileMeta(NamedTuple):
    shape: tuple
    dtype: str
    size: int       # elements
    nbytes: int


def insert_frees(program, permanent) -> list:
    """Add a FREE after the last use of every storage lifetime of a non-permanent tile."""
    last_use, free_after = {}, {}
    for index, instruction in enumerate(program):
        kind = type(instruction)
        if kind is Exec:
            last_use.update(dict.fromkeys(instruction.keys, index))   # PERF: C-level loop
        elif kind is Recv:
            key = instruction.key
            previous = last_use.get(key)
            if previous is not None and key not in permanent:
                free_after.setdefault(previous, []).append(key)
            last_use[key] = index
        else:   # Send (no FREE exists yet)
            last_use[instruction.key] = index
    for key, index in last_use.items():
        if key not in permanent:
            free_after.setdefault(index, []).append(key)
    result, start = [], 0
    for index in sorted(free_after):   # PERF: copy the runs between FREEs by slices
        result.extend(program[start:index + 1])
        result.extend([new_tuple(Free, (key,)) for key in free_after[index]])
        start = index + 1
    result.extend(program[start:])
    return result


def recv_positions(program) -> list:
    return [index for index, instruction in enumerate(program) if type(instruction) is Recv]


def posts_before(positions, index, posted, window) -> int:
    """How many RECVs must be posted before running instruction `index`."""
    first_pending = bisect.bisect_left(positions, index)
    return max(posted, min(len(positions), first_pending + window))


def simulate_memory(program, permanent_bytes, permanent, meta, window) -> int:
    """Peak bytes this rank holds while running `program` once."""
    positions = recv_positions(program)
    current = peak = permanent_bytes
    live, posted = set(permanent), 0
    for index, instruction in enumerate(program):
        target = posts_before(positions, index, posted, window)
        for position in positions[posted:target]:
            current += program[position].nbytes
        posted = target
        peak = max(peak, current)
        kind = type(instruction)
        if kind is Exec:
            for key in instruction.writes:
                if key not in live:
                    live.add(key)
                    current += meta[key].nbytes
            peak = max(peak, current)
        elif kind is Recv:
            if instruction.key in live:
                current -= meta[instruction.key].nbytes   # the received copy replaces it
            live.add(instruction.key)
        elif kind is Free or kind is Evict:
            live.discard(instruction.key)
            current -= meta[instruction.key].nbytes
        elif kind is Prefetch:
            live.add(instruction.key)
            current += instruction.nbytes
            peak = max(peak, current)
    return peak
