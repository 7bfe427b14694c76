"""Run one rank's script, and mark the rank done when its interpreter ends normally.

The launcher (launch.py) starts every rank as `python .../rank_entry.py script.py
args...` with $NNTILE_SPMD_DONE_DIR naming a directory. A rank whose interpreter
shuts down normally (the script returned, or called sys.exit) writes
`rank<R>.done` there, from the last atexit handler to run. A rank that left by
os._exit, a crash or a signal writes nothing, and since such a rank can still exit
with status 0 (mpiexec then reports success), the launcher checks the markers. Each
rank also writes `rank<R>.pid` at its start: mpiexec names a killed rank by its pid
only, and the launcher translates it.

Standard library only, and run by path, not with -m: importing the package would
load numba and the graph layer into ranks whose script never uses them.
"""

import atexit
import os
import runpy
import sys

DONE_DIR_VAR = "NNTILE_SPMD_DONE_DIR"
# (rank variable, size variable) set by MPICH/Hydra, Open MPI, PMIx and Slurm's srun.
LAUNCHER_VARIABLES = (("PMI_RANK", "PMI_SIZE"),
                      ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
                      ("PMIX_RANK", "PMIX_SIZE"),
                      ("SLURM_PROCID", "SLURM_NTASKS"))


def launched_rank_and_size():
    """(rank, size) from the launcher's environment, or None outside a launcher."""
    for rank_name, size_name in LAUNCHER_VARIABLES:
        if rank_name in os.environ and size_name in os.environ:
            try:
                return int(os.environ[rank_name]), int(os.environ[size_name])
            except ValueError:
                continue
    return None


def marker_path(directory: str, rank: int) -> str:
    return os.path.join(directory, f"rank{rank}.done")


def pid_path(directory: str, rank: int) -> str:
    return os.path.join(directory, f"rank{rank}.pid")


def write_marker(path: str, text: str, rank: int) -> None:
    try:
        with open(path, "w") as marker:
            marker.write(text)
    except OSError as error:   # the launcher will name this rank: say why here
        print(f"[rank {rank}] cannot write {path}: {error}", file=sys.stderr)


def main() -> None:
    """Run sys.argv[1] as `python script.py args...` would, marker included."""
    script = sys.argv[1]
    sys.argv = sys.argv[1:]
    # as `python script.py` does: the script's folder first on the path, not ours
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    directory, launched = os.environ.get(DONE_DIR_VAR), launched_rank_and_size()
    if directory and launched:
        rank = launched[0]
        write_marker(pid_path(directory, rank), str(os.getpid()), rank)
        # registered first, so it runs last: after the script's own exit handlers
        atexit.register(write_marker, marker_path(directory, rank), "", rank)
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
