"""Search layer: choose the plan. `autoplan` walks the candidate space (space.py),
plans each candidate (score.py), drops those over the memory budget on any planned
rank and ranks the rest by predicted step time, then, in an MPI job, runs the first
few for some steps (trials.py); `compile(distribution="auto")`
compiles the first. Sits above runtime and simulate; nothing below imports it.
"""

from __future__ import annotations

from .auto_compile import compile, compile_async, compile_chosen
from .choose import autoplan
from .machine import quick_calibrate
from .score import Candidate
from .space import MESH_AXES

__all__ = ["autoplan", "compile", "compile_async", "compile_chosen", "Candidate",
           "MESH_AXES", "quick_calibrate"]
