"""Runtime layer: a rank that raises ends the whole MPI job promptly.

MPI's default is to let the other ranks wait forever in a receive. When a job has
more than one rank we install a sys.excepthook that prints the traceback (once,
from the failing rank, prefixed with its number) and calls MPI_Abort, which makes
mpiexec/srun kill every rank and exit non-zero. This works for plain
`mpiexec -n N python script.py`, not only under `python -m mpi4py`.
"""

from __future__ import annotations

import sys
import traceback

_installed = False


def install_abort_on_error(world):
    global _installed
    if _installed or world.size == 1:
        return
    previous_hook = sys.excepthook

    def abort_hook(kind, value, trace):
        text = "".join(traceback.format_exception(kind, value, trace))
        sys.stderr.write(f"[rank {world.rank}] uncaught exception, aborting the job:\n{text}")
        sys.stderr.flush()
        try:
            from mpi4py import MPI
            MPI.COMM_WORLD.Abort(1)
        finally:
            previous_hook(kind, value, trace)

    sys.excepthook = abort_hook
    _installed = True
