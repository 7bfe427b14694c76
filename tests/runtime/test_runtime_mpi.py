"""Multi-rank runtime tests on real MPI ranks (comm=None -> MPI.COMM_WORLD).

    mpiexec -n 2 python -m pytest --with-mpi -p no:cacheprovider tests/runtime/test_runtime_mpi.py
    mpiexec -n 3 python -m pytest --with-mpi -p no:cacheprovider tests/runtime/test_runtime_mpi.py

Every rank checks its part and the ranks all-reduce the verdict (helpers.collective_ok),
so a rank that fails never leaves the others waiting. Errors inside a run are
caught and become that rank's verdict, and compile() gets a short receive timeout:
a rank left waiting for a message raises instead of hanging. Without --with-mpi
(plain pytest) pytest-mpi skips these tests.
"""

import time

import numpy as np
import pytest
from helpers import collective_ok, guarded, run_case, stat_problems
from mpi4py import MPI
from op_cases import OP_CASES

import nntile_spmd as nt
from nntile_spmd import TileDistribution
from nntile_spmd.runtime.executor import RecvTimeout

pytestmark = pytest.mark.mpi(min_size=2)
PRESETS = ("single", "ddp", "fsdp", "tp")
COMM = MPI.COMM_WORLD
TIMEOUT = 60.0   # seconds a receive may wait before the run is declared failed


def uneven_sizes(case):
    return dict.fromkeys(case.letters(), 5) | dict.fromkeys(case.letters()[1::2], 3)


# On 2 ranks only: a third real rank reaches no line or branch of nntile_spmd that the
# 2-rank sweep and the 3-rank tier's other tests do not (docs/testing.md), and the
# single-process tier runs every case uneven on 4 simulated ranks under every preset and
# on worlds of 1-8 that hypothesis draws (test_runtime_ops.py).
@pytest.mark.two_ranks
@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("case", OP_CASES, ids=str)
def test_op_case_on_mpi_ranks(case, preset):
    """Manual uneven tiles (2 on dims of 5 and 3) and tiny auto tiles, vs NumPy;
    this rank's measured bytes sent and peak equal the plan's."""
    sizes = uneven_sizes(case)
    problems = guarded(run_case, case, sizes, None, preset, tiles=dict.fromkeys(sizes, 2),
                       recv_timeout=TIMEOUT)
    problems += guarded(run_case, case, sizes, None, preset, target_bytes=48, seed=1,
                        recv_timeout=TIMEOUT)
    assert collective_ok(COMM, not problems), problems


def matmul(a_dist, b_dist, c_dist, **options):
    g = nt.LogicalGraph("matmul")
    a = g.tensor([4, 6], "A", dtype="fp64", external=True)
    b = g.tensor([6, 4], "B", dtype="fp64", external=True)
    nt.ops.gemm(a, b, "C").mark_output()
    return nt.compile(g, tiling=nt.TilingStrategy.manual({"A": [2, 3], "B": [3, 4]}),
                      distribution={"A": a_dist, "B": b_dist, "C": c_dist}, **options)


RNG = np.random.default_rng(3)
A, B = RNG.standard_normal((4, 6)), RNG.standard_normal((6, 4))


def test_get_output_with_root():
    def check():
        cg = matmul(TileDistribution.round_robin(), TileDistribution.block(),
                    TileDistribution.block_along_dim(0), recv_timeout=TIMEOUT)
        cg.bind_data("A", A)
        cg.bind_data("B", B)
        cg.execute()
        problems = stat_problems(cg)
        for root in range(COMM.size):
            result = cg.get_output("C", root=root)
            if COMM.rank == root and not np.allclose(result, A @ B, rtol=1e-12):
                problems.append(f"root {root}: wrong result")
            if COMM.rank != root and result is not None:
                problems.append(f"root {root}: rank {COMM.rank} got {type(result)}, not None")
        if not np.allclose(cg.get_output("C"), A @ B, rtol=1e-12):
            problems.append("get_output without root: wrong result")
        return problems
    problems = guarded(check)
    assert collective_ok(COMM, not problems), problems


@pytest.mark.parametrize("preset", PRESETS)
def test_bind_tiles_with_local_tiles(preset):
    def check():
        g = nt.LogicalGraph("bias")
        x = g.tensor([7, 10], "x", dtype="fp64", external=True)
        w = g.tensor([5, 7], "w", dtype="fp64", requires_grad=True, persistent=True)
        nt.ops.relu(nt.ops.gemm(w, x, "y"), "z").mark_output()
        cg = nt.compile(g, tiling=nt.TilingStrategy.manual({"x": [3, 4], "w": [2, 3]}),
                        distribution=preset, recv_timeout=TIMEOUT)
        rng = np.random.default_rng(5)
        arrays = {"x": rng.standard_normal((7, 10)), "w": rng.standard_normal((5, 7))}
        for name, array in arrays.items():   # a loader reading only this rank's shard
            spec = cg.plan.tilings[name]
            cg.bind_tiles(name, {coord: array[spec.tile_slices(coord)]
                                 for coord in cg.local_tiles(name)})
        cg.execute()
        problems = stat_problems(cg)
        if not np.allclose(cg.get_output("z"), np.maximum(arrays["w"] @ arrays["x"], 0)):
            problems.append("wrong result")
        return problems
    problems = guarded(check)
    assert collective_ok(COMM, not problems), problems


@pytest.mark.parametrize("batch", [12, 13])
def test_ddp_gradient_bitwise_equal_on_every_rank(batch):
    def check():
        g = nt.LogicalGraph("ddp_grad")
        dy = g.tensor([6, batch], "dY", dtype="fp64", external=True)
        x = g.tensor([5, batch], "X", dtype="fp64", external=True)
        nt.ops.gemm(dy, x, "dW", trans_b=True).mark_output()
        cg = nt.compile(g, tiling=nt.TilingStrategy.manual({"dY": [3, 2]}), distribution="ddp",
                        recv_timeout=TIMEOUT)
        rng = np.random.default_rng(2)
        dy_array = rng.standard_normal((6, batch))
        x_array = rng.standard_normal((5, batch))
        cg.bind_data("dY", dy_array)
        cg.bind_data("X", x_array)
        cg.execute()
        dw = cg.get_output("dW")       # replicated: each rank returns its own copy
        problems = stat_problems(cg)
        if not np.allclose(dw, dy_array @ x_array.T, rtol=1e-12):
            problems.append("wrong dW")
        if any(other != dw.tobytes() for other in COMM.allgather(dw.tobytes())):
            problems.append("dW differs between ranks")
        return problems
    problems = guarded(check)
    assert collective_ok(COMM, not problems), problems


def test_fingerprint_mismatch_raises_on_every_rank():
    """The last rank builds a different shape: compile raises on all ranks, naming it."""
    last = COMM.size - 1

    def check():
        g = nt.LogicalGraph("mismatch")
        x = g.tensor([6, 13 if COMM.rank == last else 12], "x", external=True)
        nt.ops.gelu(x, "y").mark_output()
        try:
            nt.compile(g, distribution="ddp", recv_timeout=TIMEOUT)
        except RuntimeError as error:
            text = str(error)
            wanted = [f"rank {last} differs", "x[6, 13]"]
            return [f"message lacks {w!r}: {text}" for w in wanted if w not in text]
        return ["compile did not raise"]
    problems = guarded(check)
    assert collective_ok(COMM, not problems), problems


def test_recv_timeout_names_the_silent_rank_and_the_step():
    """Rank 1 skips execute; rank 0 times out within the deadline with a message naming
    rank 1 as silent and the execute it waited in, and saying the error is final
    (it used to accept rank 1's late execute, i.e. another step's tiles)."""
    def check():
        cg = matmul(TileDistribution.on_rank(0), TileDistribution.on_rank(1),
                    TileDistribution.on_rank(0), recv_timeout=0.5)
        cg.bind_data("A", A)
        cg.bind_data("B", B)
        problems = []
        if COMM.rank != 1:
            start = time.perf_counter()
            try:
                cg.execute()
                problems.append(f"rank {COMM.rank} did not time out")
            except RecvTimeout as error:
                text = str(error)
                wanted = ["rank(s) [1] did not respond", "execute #0 of graph", "final"]
                problems += [f"message lacks {w!r}: {text}" for w in wanted if w not in text]
                if time.perf_counter() - start > 10:
                    problems.append("timed out too late")
        COMM.Barrier()
        return problems
    problems = guarded(check)
    assert collective_ok(COMM, not problems), problems


def test_bind_tiles_wrong_on_one_rank_raises_on_every_rank():
    """The last rank passes a tile it does not hold (or misses one): every rank raises
    ValueError (none is left waiting in the collective), and nothing is marked bound."""
    def check():
        g = nt.LogicalGraph("shards")
        x = g.tensor([8, 6], "x", dtype="fp64", external=True)
        nt.ops.relu(x, "y").mark_output()
        cg = nt.compile(g, tiling=nt.TilingStrategy.manual({"x": [2, 6]}), distribution="ddp",
                        recv_timeout=TIMEOUT)
        spec = cg.plan.tilings["x"]
        tiles = {coord: np.ones(spec.tile_shape(coord)) for coord in cg.local_tiles("x")}
        if COMM.rank == COMM.size - 1:
            tiles = {} if tiles else {(0, 0): np.ones((2, 6))}
        try:
            cg.bind_tiles("x", tiles)
        except ValueError as error:
            return [] if "x" not in cg.bound else [f"x marked bound after {error}"]
        return ["bind_tiles did not raise"]
    problems = guarded(check)
    assert collective_ok(COMM, not problems), problems
