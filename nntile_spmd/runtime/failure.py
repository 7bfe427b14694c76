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

import array
import os
import stat
import sys
import time
import traceback

# (rank variable, size variable) set by MPICH/Hydra, Open MPI, PMIx and Slurm's srun.
LAUNCHER_VARIABLES = (("PMI_RANK", "PMI_SIZE"),
                      ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
                      ("PMIX_RANK", "PMIX_SIZE"),
                      ("SLURM_PROCID", "SLURM_NTASKS"))

_installed = False


def launched_rank_and_size():
    """(rank, size) from the launcher's environment, or None outside a launcher."""
    for rank_name, size_name in LAUNCHER_VARIABLES:
        if rank_name in os.environ and size_name in os.environ:
            try:
                return int(os.environ[rank_name]), int(os.environ[size_name])
            except ValueError:
                continue
    return None


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
        wait_until_read(sys.stderr)
        if kind is KeyboardInterrupt:
            previous_hook(kind, value, trace)
        from mpi4py import MPI   # loaded only now: importing it initializes MPI
        MPI.COMM_WORLD.Abort(1)

    sys.excepthook = abort_hook
    _installed = True


def wait_until_read(stream, limit_s=2.0):
    """Return once the launcher has read all this rank wrote to `stream`, if a pipe.

    MPI_Abort tears the job down at once: text the launcher has not yet read from
    the rank's pipe is lost with it, and the job ends with no word of its cause.
    Linux answers FIONREAD on either end of a pipe with the bytes still in it.
    """
    try:
        import fcntl
        import termios
        descriptor = stream.fileno()
        if not stat.S_ISFIFO(os.fstat(descriptor).st_mode):
            return
    except (ImportError, AttributeError, OSError, ValueError):
        return
    unread, deadline = array.array("i", [0]), time.monotonic() + limit_s
    while time.monotonic() < deadline:
        try:
            fcntl.ioctl(descriptor, termios.FIONREAD, unread)
        except OSError:
            return
        if unread[0] == 0:
            return
        time.sleep(0.001)
