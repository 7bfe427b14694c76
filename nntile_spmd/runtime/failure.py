"""Runtime layer: a rank that raises ends the whole MPI job promptly.

MPI's default is to let the other ranks wait forever in a receive or collective.
When the process was started by an MPI launcher with more than one rank, we
install a sys.excepthook that prints the traceback once, prefixed by the rank,
and calls MPI_Abort, which makes mpiexec/srun kill every rank and exit non-zero.
It is installed at `import nntile_spmd` (from the launcher's environment, without
loading mpi4py) so it also covers errors raised before compile(), and it works
for plain `mpiexec -n N python script.py`, not only under `python -m mpi4py`.
"""

from __future__ import annotations

import sys
import traceback

from ..rank_entry import launched_rank_and_size
from . import abnormal_end

_installed = False


def install_abort_on_error(rank=None, size=None):
    """Make an uncaught exception on this rank abort the whole job (size > 1)."""
    global _installed
    if rank is None or size is None:
        launched = launched_rank_and_size()
        if launched is None:
            return
        rank, size = launched
    if _installed or size <= 1:
        return
    previous_hook = sys.excepthook

    def abort_hook(kind, value, trace):
        text = "".join(traceback.format_exception(kind, value, trace))
        sys.stderr.write(f"[rank {rank}] uncaught exception, aborting the job:\n{text}")
        sys.stderr.flush()
        if kind is KeyboardInterrupt:
            previous_hook(kind, value, trace)
        abnormal_end.run_cleanups()    # MPI_Abort ends the process without atexit
        from mpi4py import MPI   # loaded only now: importing it initializes MPI
        MPI.COMM_WORLD.Abort(1)

    sys.excepthook = abort_hook
    _installed = True
