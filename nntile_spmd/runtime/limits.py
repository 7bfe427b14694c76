"""Runtime layer: refuse a graph that cannot fit in memory before planning it.

Planning tiles every tensor; a tensor of 10**12 elements took minutes and 10 GB of
the planner before anything could fail. A lower bound of the bytes this process
must hold is cheap (shapes only), so compile() compares it with the memory
available first. The bound never exceeds what the plan needs, so it cannot reject
a graph that fits.
"""

from __future__ import annotations

import math
import os

from ..graph.dtypes import ITEMSIZE
from ..plan import PlanError


def tensor_bytes(tensor) -> int:
    return math.prod(tensor.shape) * ITEMSIZE[tensor.dtype]


def available_bytes():
    """Memory this process may still allocate (MemAvailable), or None if unknown."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def minimum_bytes(graph, world_size: int, ranks_here: int) -> tuple:
    """(bytes, largest tensor): the kept tensors, or the largest tensor, spread evenly
    over the ranks, times the ranks living in this process."""
    tensors = graph.tensors()
    kept = sum(tensor_bytes(t) for t in tensors if t.keeps_storage)
    largest = max(tensors, key=tensor_bytes, default=None)
    floor = max(kept, tensor_bytes(largest) if largest is not None else 0)
    return math.ceil(floor / world_size) * ranks_here, largest


def check_fits_in_memory(graph, world_size: int, ranks_here: int, available=None):
    """Raise PlanError, naming planned and available bytes, if the graph cannot fit."""
    available = available_bytes() if available is None else available
    if available is None or graph.symbols():   # build_plan names unbound dims
        return
    needed, largest = minimum_bytes(graph, world_size, ranks_here)
    if needed > available:
        raise PlanError(
            f"compile: graph {graph.name!r} needs at least {needed:,} bytes on this process "
            f"({ranks_here} of {world_size} rank(s); the largest tensor "
            f"{largest.describe()} alone is {tensor_bytes(largest):,} bytes) but "
            f"{available:,} bytes of memory are available: use more ranks or smaller tensors")
