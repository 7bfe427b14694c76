"""Plan layer: a rank's program cut into segments for replay as CUDA graphs.

Each rank's program is fixed at compile time, so the runs of device work between its
MPI points can be captured once (the kernel launches with their buffers) and replayed
every step: host cost per step then grows with the segments, not with the tasks. A
device segment is a maximal run of EXECs and the FREEs among them (a FREE only hands
a buffer back to the rank's spare lists: host bookkeeping that a replay, whose
buffers are the captured ones, does not need). SEND, RECV, EVICT and PREFETCH are
host points: MPI or host copies, each a segment of its own. A replay must find every
tile a segment reads (`reads`: used before the segment writes it) in the buffer the
capture saw, so a RECV or PREFETCH writes into that buffer and a bound input is
copied into it (the runtime's copy_in does). An EXEC whose params hold a runtime
Scalar (a learning rate) is listed in `scalar_execs`: a replay must give it the
current value (a captured launch keeps the value it was captured with).

Imports plan/instructions.py and the graph layer's Scalar only.
"""

from __future__ import annotations

from typing import NamedTuple

from ..graph.scalars import Scalar
from .instructions import Exec, Free

DEVICE, HOST = "device", "host"
DEVICE_WORK = (Exec, Free)   # the instruction kinds a captured segment holds


class Segment(NamedTuple):
    """program[start:stop]: a device run (kind DEVICE) or one host point (HOST)."""

    kind: str
    start: int
    stop: int
    execs: int          # EXECs in it: the kernel launches one replay replaces
    reads: frozenset    # tile keys it reads before writing them (must be in place)
    writes: frozenset   # tile keys its EXECs write
    scalar_execs: tuple = ()   # program positions of its EXECs with runtime scalars


def program_segments(program) -> list:
    """The program's segments in order; their spans cover it exactly once."""
    segments, start = [], 0
    while start < len(program):
        if type(program[start]) in DEVICE_WORK:
            stop = start
            while stop < len(program) and type(program[stop]) in DEVICE_WORK:
                stop += 1
            segments.append(device_segment(program, start, stop))
        else:
            stop = start + 1
            segments.append(Segment(HOST, start, stop, 0, frozenset(), frozenset()))
        start = stop
    return segments


def device_segment(program, start, stop) -> Segment:
    reads, writes, execs, scalar_execs = set(), set(), 0, []
    for position in range(start, stop):
        instruction = program[position]
        if type(instruction) is Exec:
            execs += 1
            if any(type(value) is Scalar for value in instruction.params.values()):
                scalar_execs.append(position)
            # an accumulating output (a gemm with beta != 0) is among the inputs too
            inputs = instruction.keys[:len(instruction.keys) - len(instruction.writes)]
            reads.update(key for key in inputs if key not in writes)
            writes.update(instruction.writes)
    return Segment(DEVICE, start, stop, execs, frozenset(reads), frozenset(writes),
                   tuple(scalar_execs))


def segment_summary(program) -> str:
    """One line: device runs, the EXECs in them, host points (dump listings, benches)."""
    segments = program_segments(program)
    device = [s for s in segments if s.kind == DEVICE and s.execs]
    execs = sum(s.execs for s in device)
    hosts = sum(s.kind == HOST for s in segments)
    largest = max((s.execs for s in device), default=0)
    return (f"{len(device)} device segment(s) holding {execs} EXEC(s) (largest {largest}), "
            f"{hosts} host point(s)")
