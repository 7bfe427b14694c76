"""Runtime layer: the values of a compiled graph's runtime scalars (graph/scalars.py)
and the programs that carry them to the kernels.

The plan keeps `Scalar` objects in its EXEC params. For each (phases, rank) this
module keeps one private copy of the program in which those EXECs are replaced by
EXECs with new params holding plain floats (the plan's params are immutable,
plan/kernel_params.py); when a value changes only those entries are replaced. The
copy keeps its identity, so the tile store's spare buffers (keyed by program) survive
a learning-rate schedule that changes the rate every step.
"""

from __future__ import annotations

from ..graph.scalars import Scalar, check_value, graph_scalars
from ..plan.instructions import Exec
from ..plan.kernel_params import KernelParams


class ScalarTable:
    """{scalar name: current value}, starting at the defaults given in the graph."""

    def __init__(self, graph):
        self.values = {name: float(default) for name, default in graph_scalars(graph).items()}
        self.version = 0    # bumped on every change: resolved programs compare it

    def set(self, name: str, value) -> None:
        self.check_name(name)
        value = check_value(name, value)
        if self.values[name] != value:
            self.values[name] = value
            self.version += 1

    def get(self, name: str) -> float:
        self.check_name(name)
        return self.values[name]

    def check_name(self, name):
        if name not in self.values:
            known = ", ".join(sorted(self.values)) or "none"
            raise KeyError(f"no runtime scalar {name!r} in this graph (it has: {known})")


class ResolvedProgram:
    """One rank's program for one phase set, with the scalars' current values filled in."""

    def __init__(self, program):
        self.sites = scalar_sites(program)
        self.program = list(program) if self.sites else program
        self.version = None

    def current(self, table: ScalarTable) -> list:
        """The program for the table's values (rewritten only if they changed)."""
        if self.sites and self.version != table.version:
            resolved = {}   # id(params) -> params with values: EXECs share params
            for position, instruction in self.sites:
                params = resolved.get(id(instruction.params))
                if params is None:
                    params = resolved[id(instruction.params)] = KernelParams({
                        key: value.resolve(table.values) if type(value) is Scalar else value
                        for key, value in instruction.params.items()})
                self.program[position] = instruction._replace(params=params)
            self.version = table.version
        return self.program


def scalar_sites(program) -> list:
    """(position, EXEC) of every instruction whose params hold a Scalar."""
    has_scalar = {}    # id(params) -> bool; PERF: the plan shares params widely
    sites = []
    for position, instruction in enumerate(program):
        if type(instruction) is Exec:
            params = instruction.params
            found = has_scalar.get(id(params))
            if found is None:
                found = has_scalar[id(params)] = any(type(value) is Scalar
                                                     for value in params.values())
            if found:
                sites.append((position, instruction))
    return sites
