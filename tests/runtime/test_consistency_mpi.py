"""Ranks that diverge raise on every rank instead of exchanging another step's tiles.

    mpiexec -n 2 python -m pytest --with-mpi -p no:cacheprovider \
        tests/runtime/test_consistency_mpi.py        (and -n 3)

Each execute starts with a fingerprint allgather (runtime/consistency.py); bind_tiles
compares the hashes of replicated tiles. Verdicts are collective (helpers.collective_ok).
"""

import os

import numpy as np
import pytest
from helpers import collective_ok
from mpi4py import MPI

import nntile_spmd as nt
from nntile_spmd import TileDistribution
from nntile_spmd.runtime import failure

pytestmark = pytest.mark.mpi(min_size=2)
COMM = MPI.COMM_WORLD
LAST = COMM.size - 1
TIMEOUT = 30.0


def transfer_graph():
    """x (on rank 0) -> y = relu(x) on the last rank: every execute moves tiles."""
    g = nt.LogicalGraph("transfer")
    x = g.tensor([4, 6], "x", dtype="fp64", external=True)
    nt.ops.relu(x, "y").mark_output()
    w = g.tensor([4, 6], "w", dtype="fp64", external=True)
    nt.ops.relu(w, "v").mark_output()
    distribution = {"x": TileDistribution.on_rank(0), "y": TileDistribution.on_rank(LAST),
                    "w": TileDistribution.replicated(), "v": TileDistribution.replicated()}
    return nt.compile(g, tiling=nt.TilingStrategy.manual({"x": [2, 3]}),
                      distribution=distribution, recv_timeout=TIMEOUT)


def data(step):
    return np.full((4, 6), float(step + 1))


def run_steps(cg, skip_on_last):
    """Bind each step's data; the last rank skips the execute of step 1. -> errors seen"""
    errors = []
    for step in range(3):
        cg.bind_data("x", data(step))
        cg.bind_data("w", data(0))
        if step == 1 and skip_on_last and COMM.rank == LAST:
            continue
        try:
            cg.execute()
            cg.get_output("y")
        except RuntimeError as error:
            errors.append(str(error))
            break
    return errors


def test_all_ranks_in_step_run_normally():
    cg = transfer_graph()
    errors = run_steps(cg, skip_on_last=False)
    ok = not errors and np.array_equal(cg.get_output("y"), data(2))
    assert collective_ok(COMM, ok), errors


def test_skipped_execute_raises_on_every_rank():
    """The last rank skips one execute; before the fingerprint its next execute took
    rank 0's tiles of the step before and returned them as this step's."""
    errors = run_steps(transfer_graph(), skip_on_last=True)
    ok = len(errors) == 1 and "the ranks diverged" in errors[0] and "['x']" in errors[0]
    assert collective_ok(COMM, ok), errors


def test_other_phases_on_one_rank_raise_on_every_rank():
    cg = transfer_graph()
    cg.bind_data("x", data(0))
    cg.bind_data("w", data(0))
    try:
        cg.execute(phases="forward" if COMM.rank == LAST else None)
        errors = []
    except RuntimeError as error:
        errors = [str(error)]
    ok = len(errors) == 1 and f"rank {LAST} is at execute #0 with phases ('forward',)" in errors[0]
    assert collective_ok(COMM, ok), errors


def test_different_replicated_data_raises_at_the_next_execute():
    cg = transfer_graph()
    cg.bind_data("x", data(0))
    cg.bind_data("w", data(COMM.rank))          # replicated, yet different per rank
    try:
        cg.execute()
        errors = []
    except RuntimeError as error:
        errors = [str(error)]
    ok = len(errors) == 1 and "bound different data than rank 0 for ['w']" in errors[0]
    assert collective_ok(COMM, ok), errors


def test_different_replicated_tiles_raise_in_bind_tiles():
    cg = transfer_graph()
    tiles = {coord: data(COMM.rank)[cg.plan.tilings["w"].tile_slices(coord)]
             for coord in cg.local_tiles("w")}
    try:
        cg.bind_tiles("w", tiles)
        errors = []
    except ValueError as error:
        errors = [str(error)]
    ok = len(errors) == 1 and "differ from rank 0 in the tiles every rank holds" in errors[0]
    assert collective_ok(COMM, ok), errors


def test_runtime_scalar_set_on_one_rank_raises_naming_it():
    """The last rank sets lr alone: before, every rank ran on with its own lr and the
    "replicated" output differed per rank with no error."""
    g = nt.LogicalGraph("scaled")
    w = g.tensor([4, 6], "w", dtype="fp64", external=True)
    nt.ops.scale(w, "v", alpha=nt.Scalar("lr", 1e-3)).mark_output()
    cg = nt.compile(g, distribution={"w": TileDistribution.replicated(),
                                     "v": TileDistribution.replicated()},
                    recv_timeout=TIMEOUT)
    cg.bind_data("w", data(0))
    cg.execute()                                 # equal scalars: runs
    if COMM.rank == LAST:
        cg.set_scalar("lr", 5e-2)
    try:
        cg.execute()
        errors = []
    except RuntimeError as error:
        errors = [str(error)]
    expected = f"runtime scalar 'lr' is 0.05 on rank {LAST} but 0.001 on rank 0"
    ok = len(errors) == 1 and expected in errors[0]
    assert collective_ok(COMM, ok), errors


def test_compile_records_every_ranks_host_and_pid_for_the_abort_message():
    transfer_graph()
    mine = failure.PEERS.get(COMM.rank)
    ok = len(failure.PEERS) == COMM.size and mine == (failure.this_host(), os.getpid())
    assert collective_ok(COMM, ok), failure.PEERS


def activation_graph(activation):
    g = nt.LogicalGraph("act")
    x = g.tensor([4, 6], "x", dtype="fp64", external=True)
    getattr(nt.ops, activation)(x, "y").mark_output()
    return g


def compile_error(**options) -> list:
    try:
        nt.compile(options.pop("graph", None) or activation_graph("relu"),
                   recv_timeout=TIMEOUT, **options)
    except RuntimeError as error:
        return [str(error)]
    return []


# what the last rank alone does differently -> what the error must say
DIVERGENT_COMPILES = {
    "deterministic": ({"deterministic": True},
                      f"in its deterministic (True on rank {LAST}, False on rank 0, set by "
                      "compile(deterministic=...))"),
    "fuse_from_env": ({"env": {"NNTILE_SPMD_FUSE": "1"}},
                      f"in its fuse (True on rank {LAST}, False on rank 0, set by "
                      "compile(fuse=...) or $NNTILE_SPMD_FUSE)"),
    "activation": ({"graph": activation_graph("gelu")},
                   f"first op difference: rank 0 has op relu_0 = relu(x) -> y, rank {LAST} "
                   "has op gelu_0 = gelu(x) -> y"),
}


@pytest.mark.parametrize("case", sorted(DIVERGENT_COMPILES))
def test_a_divergent_compile_names_what_differs(case, monkeypatch):
    """Before, all three said only "differs ... in its distribution" or "in its graph"."""
    options, expected = DIVERGENT_COMPILES[case]
    options = dict(options) if COMM.rank == LAST else {}
    for name, value in options.pop("env", {}).items():
        monkeypatch.setenv(name, value)
    errors = compile_error(**options)
    ok = len(errors) == 1 and expected in errors[0]
    assert collective_ok(COMM, ok), errors
