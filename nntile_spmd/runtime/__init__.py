"""Runtime layer: executes rank programs (MPI or simulated), tile storage, devices.

Imports mpi4py only when a real MPI world is used; never imports CuPy on the CPU path.
"""

from .compiled import CompiledGraph, PendingCompile, compile, compile_async
from .planning import PlanningWorld
from .simulated import SimulatedWorld
from .world import World

__all__ = ["CompiledGraph", "PendingCompile", "compile", "compile_async", "PlanningWorld",
           "SimulatedWorld", "World"]
