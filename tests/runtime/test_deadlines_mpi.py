"""Every collective of the library has a deadline: when the last rank never joins,
the others raise RankUnresponsive naming it instead of hanging.

    mpiexec -n 2 python -m pytest --with-mpi -p no:cacheprovider \\
        tests/runtime/test_deadlines_mpi.py        (and -n 3)
"""

import re

import numpy as np
import pytest
from helpers import collective_ok
from mpi4py import MPI

import nntile_spmd as nt
from nntile_spmd.runtime.unresponsive import RankUnresponsive
from nntile_spmd.train import save_checkpoint

pytestmark = pytest.mark.mpi(min_size=2)
COMM = MPI.COMM_WORLD
LAST = COMM.size - 1
SILENT = re.compile(r"rank\(s\) \[([\d, ]*)\] did not respond")


def compiled():
    """y lives on the last rank: the others must receive it to read it."""
    g = nt.LogicalGraph("deadline")
    x = g.tensor([4, 6], "x", dtype="fp64", external=True)
    nt.ops.relu(x, "y").mark_output()
    w = g.tensor([3], "w", dtype="fp64", persistent=True)
    nt.ops.relu(w, "v").mark_output()
    cg = nt.compile(g, distribution={"x": nt.TileDistribution.on_rank(0),
                                     "y": nt.TileDistribution.on_rank(LAST)},
                    tiling=nt.TilingStrategy.manual({"x": [2, 3]}), recv_timeout=0.5)
    cg.bind_data("x", np.ones((4, 6)))
    cg.bind_data("w", np.ones(3))
    cg.execute()
    return cg


CALLS = {
    "get_output": lambda cg, tmp: cg.get_output("y"),
    "get_output root": lambda cg, tmp: cg.get_output("y", root=0),
    "bind_tiles": lambda cg, tmp: cg.bind_tiles("x", {c: np.ones((2, 3))
                                                      for c in cg.local_tiles("x")}),
    "execute": lambda cg, tmp: cg.execute(),
    "save_checkpoint": lambda cg, tmp: save_checkpoint(cg, tmp),
}


# what else the message must say (a checkpoint save was "an exchange of small values")
NAMED_IN_MESSAGE = {"save_checkpoint": ["save_checkpoint("]}


@pytest.mark.parametrize("call", CALLS)
def test_a_rank_that_never_joins_is_named(call, tmp_path_factory):
    cg = compiled()
    directory = COMM.bcast(str(tmp_path_factory.mktemp("ck")) if COMM.rank == 0 else None)
    named, problems = False, []
    if COMM.rank != LAST:
        try:
            CALLS[call](cg, directory)
        except RankUnresponsive as error:
            silent = SILENT.search(str(error))
            named = bool(silent) and str(LAST) in silent.group(1).split(", ")
            wanted = ["graph 'deadline'", "raise the deadline", *NAMED_IN_MESSAGE.get(call, ())]
            if not named or any(text not in str(error) for text in wanted):
                problems.append(str(error))
        except Exception as error:   # noqa: BLE001 - reported through the verdict
            problems.append(f"{type(error).__name__}: {error}")
    COMM.Barrier()
    some_rank_named_it = COMM.allreduce(int(named), op=MPI.MAX) == 1
    assert collective_ok(COMM, not problems and some_rank_named_it), problems
