"""Per-rank programs: docs/design.md's worked example, owner-computes vs
partial sums, and DDP's gradient all-reduce falling out of partial sums.

Plain pytest; the programs run on a SimulatedWorld.
"""

import re

import numpy as np
import pytest
from helpers import stat_problems

import nntile_spmd as nt
from nntile_spmd import REPLICATED, TileDistribution

WORKED_EXAMPLE = {   # docs/design.md, verbatim
    0: "EXEC gemm(A00,B0->C0,beta=0)  RECV B1<-1  EXEC gemm(A01,B1->C0,beta=1)  FREE B1",
    1: "SEND B1->0  EXEC gemm(A10,B0->C1,beta=0)  EXEC gemm(A11,B1->C1,beta=1)",
}


def design_notation(line):
    """EXEC gemm(A[0,1],B[1,0]->C[0,0],beta=1.0) -> EXEC gemm(A01,B1->C0,beta=1)."""
    def tile(match):
        name, row, column = match.groups()
        return f"A{row}{column}" if name == "A" else f"{name}{row}" + ("" if column == "0" else "?")
    return re.sub(r"beta=(\d+)\.0\b", r"beta=\1", re.sub(r"([ABC])\[(\d+),(\d+)\]", tile, line))


def matmul_graph(a_shape=(4, 6), b_shape=(6, 4)):
    g = nt.LogicalGraph("matmul")
    a = g.tensor(list(a_shape), "A", dtype="fp64", external=True)
    b = g.tensor(list(b_shape), "B", dtype="fp64", external=True)
    nt.ops.gemm(a, b, "C").mark_output()
    return g


def run_matmul(distribution, nranks=2, tiling=None, seed=0):
    cg = nt.compile(matmul_graph(), comm=nt.SimulatedWorld(nranks), distribution=distribution,
                    tiling=tiling or nt.TilingStrategy.manual({"A": [2, 3], "B": [3, 4]}))
    rng = np.random.default_rng(seed)
    a, b = rng.standard_normal((4, 6)), rng.standard_normal((6, 4))
    cg.bind_data("A", a)
    cg.bind_data("B", b)
    cg.execute()
    np.testing.assert_allclose(cg.get_output("C"), a @ b, rtol=1e-12)
    assert not stat_problems(cg)
    return cg


def b0_replicated_b1_on_rank1(coord, grid, nranks):
    return REPLICATED if coord[0] == 0 else 1


def test_worked_example_programs():
    cg = run_matmul({"A": TileDistribution.block_along_dim(0),
                     "B": TileDistribution.custom(b0_replicated_b1_on_rank1),
                     "C": TileDistribution.block_along_dim(0)})
    for rank, expected in WORKED_EXAMPLE.items():
        program = [design_notation(line) for line in cg.program(rank).splitlines()]
        assert program == expected.split("  "), f"rank {rank}:\n{cg.program(rank)}"
    b1_bytes = 3 * 4 * 8
    assert cg.estimate_communication() == cg.estimate_communication(1) == b1_bytes
    assert cg.get_stats(1).bytes_transferred == b1_bytes


def test_only_the_bytes_of_b_move():
    """C = A @ B, all of A and C on rank 0, all of B on rank 1: B moves, nothing else
    (partial sums next to B would move A and the partial C tiles: more bytes)."""
    cg = run_matmul({"A": TileDistribution.on_rank(0), "B": TileDistribution.on_rank(1),
                     "C": TileDistribution.on_rank(0)})
    assert cg.estimate_communication() == cg.estimate_communication(1) == 6 * 4 * 8
    assert all(line.startswith("SEND B[") for line in cg.program(1).splitlines())


@pytest.mark.parametrize("tiles", [[2, 3], [3, 2], [4, 6], [1, 1]])
@pytest.mark.parametrize("nranks", [1, 2, 3])
def test_programs_of_every_rank_are_derived_alike(tiles, nranks):
    """Two independent plans of the same graph are equal (the SPMD premise), and
    every RECV pairs with a SEND of the same tile and tag on the peer, in order."""
    tiling = nt.TilingStrategy.manual({"A": tiles, "B": [tiles[1], 2]})
    plans = [nt.build_plan(matmul_graph(), nranks, tiling, "fsdp") for _ in range(2)]
    assert plans[0].fingerprint() == plans[1].fingerprint()
    assert [list(map(str, p)) for p in plans[0].programs()] == \
        [list(map(str, p)) for p in plans[1].programs()]
    sends, recvs = {}, {}
    for rank, program in enumerate(plans[0].programs()):
        for instruction in program:
            kind = type(instruction).__name__
            if kind in ("Send", "Recv"):
                pair = (rank, instruction.peer) if kind == "Send" else (instruction.peer, rank)
                (sends if kind == "Send" else recvs).setdefault(pair, []).append(
                    (instruction.key, instruction.tag, instruction.nbytes))
    assert sends == recvs


# -- DDP: dW = dY . X^T with the batch split over ranks --------------------------------
OUT, IN, BATCH = 6, 5, 16


def ddp_gradient(nranks):
    g = nt.LogicalGraph("ddp_grad")
    dy = g.tensor([OUT, BATCH], "dY", dtype="fp64", external=True)
    x = g.tensor([IN, BATCH], "X", dtype="fp64", external=True)
    nt.ops.gemm(dy, x, "dW", trans_b=True).mark_output()       # (OUT, IN)
    tiling = nt.TilingStrategy.manual({"dY": [3, 4], "X": [5, 4]})
    return nt.compile(g, comm=nt.SimulatedWorld(nranks), tiling=tiling, distribution="ddp")


def whole_tensor_on(cg, name, rank):
    """The tensor as simulated `rank` holds it (bypassing get_output's owner read)."""
    spec = cg.plan.tilings[name]
    result = np.empty(cg.graph.get_tensor(name).shape)
    for coord in spec.coords():
        result[spec.tile_slices(coord)] = cg.stores[rank][(name, coord)]
    return result


@pytest.mark.parametrize("nranks", [2, 3, 4])
def test_ddp_gradient_is_an_all_reduce_of_partial_sums(nranks):
    cg = ddp_gradient(nranks)
    assert cg.plan.distributions["dW"] == TileDistribution.replicated()
    assert cg.plan.tilings["X"].grid[1] == 4   # every rank holds a batch tile
    rng = np.random.default_rng(1)
    dy, x = rng.standard_normal((OUT, BATCH)), rng.standard_normal((IN, BATCH))
    cg.bind_data("dY", dy)
    cg.bind_data("X", x)
    cg.execute()
    copies = [whole_tensor_on(cg, "dW", rank) for rank in range(nranks)]
    np.testing.assert_allclose(copies[0], dy @ x.T, rtol=1e-12)
    assert all(np.array_equal(copy, copies[0]) for copy in copies[1:]), "not bitwise equal"
    assert not stat_problems(cg)
    dw_bytes, activation_bytes = OUT * IN * 8, (OUT + IN) * BATCH * 8
    # reduce up a tree, broadcast down: 2 (n - 1) dW-sized messages in all
    assert cg.estimate_communication() == 2 * (nranks - 1) * dw_bytes
    # gathering the activations instead would send every rank the others' batch tiles
    assert cg.estimate_communication() < (nranks - 1) * activation_bytes
    received = {line.split()[1].split("[")[0] for rank in range(nranks)
                for line in cg.program(rank).splitlines() if line.startswith("RECV")}
    assert received <= {"dW"} | {f"dW~{cg.graph.ops()[0].name}~r{r}" for r in range(nranks)}


def test_partial_results_merge_with_the_ops_combine_kernel(monkeypatch):
    """The tree that merges partial results across ranks calls the op's own combine
    kernel (logsumexp merges by logaddexp, not by add), never a hard-coded "add"."""
    import dataclasses

    from nntile_spmd.graph import REGISTRY
    monkeypatch.setitem(REGISTRY, "gemm", dataclasses.replace(REGISTRY["gemm"],
                                                              combine="merge_kernel"))
    cg = ddp_gradient(3)
    kernels = {line.split("(")[0] for rank in range(3)
               for line in cg.program(rank).splitlines() if line.startswith("EXEC")}
    assert kernels == {"EXEC gemm", "EXEC merge_kernel"}


@pytest.mark.parametrize("nranks", [2, 3])
def test_logsumexp_over_ranks_merges_by_logaddexp(nranks):
    """logsumexp along an axis whose tiles sit on different ranks: the partial results
    meet in the tree through logsumexp_merge (adding them would be wrong), and a
    slice of all -inf stays -inf on every route, never nan."""
    g = nt.LogicalGraph("lse")
    x = g.tensor([4, 7], "x", dtype="fp64", external=True)
    nt.ops.logsumexp(x, "y", axis=1).mark_output()
    cg = nt.compile(g, comm=nt.SimulatedWorld(nranks), distribution="ddp",
                    tiling=nt.TilingStrategy.manual({"x": [4, 2]}))
    kernels = {line.split("(")[0] for rank in range(nranks)
               for line in cg.program(rank).splitlines() if line.startswith("EXEC")}
    assert kernels == {"EXEC logsumexp", "EXEC logsumexp_merge"}
    values = np.random.default_rng(4).standard_normal((4, 7))
    values[1] = -np.inf                      # a whole slice masked
    values[2, 3:] = -np.inf                  # some tiles of a slice masked
    cg.bind_data("x", values)
    cg.execute()
    got = cg.get_output("y")
    with np.errstate(divide="ignore"):
        expected = np.log(np.exp(values).sum(axis=1))
    np.testing.assert_allclose(got, expected, rtol=1e-13)
    assert got[1] == -np.inf
    assert not stat_problems(cg)


def test_dead_ops_are_left_out_of_the_programs():
    """gelu's result reaches nothing kept: no instruction runs it, nothing is sent for
    it, and the report names it; relu, an output, runs."""
    g = nt.LogicalGraph("dead")
    x = g.tensor([4], "x", "fp64", external=True)
    nt.ops.relu(x, "y").mark_output()
    nt.ops.gelu(x, "unused")
    cg = nt.compile(g, comm=nt.SimulatedWorld(2), distribution="ddp",
                    tiling=nt.TilingStrategy.manual({"x": [2]}))
    assert cg.plan.dead_ops() == ["gelu_1"]
    kernels = {i.kernel for rank in (0, 1) for i in cg.plan.program(rank)
               if type(i).__name__ == "Exec"}
    assert kernels == {"relu"}
    assert "dead ops left out: gelu_1" in cg.dump_plan()
    cg.bind_data("x", np.array([-1.0, 2.0, -3.0, 4.0]))
    cg.execute()
    np.testing.assert_array_equal(cg.get_output("y"), [0, 2, 0, 4])
    assert cg.estimate_flops() == cg.get_stats(0).flops_executed + cg.get_stats(1).flops_executed


def test_dead_depends_on_the_phases_run():
    """h feeds only a backward-phase op: dead in a forward-only execute, live in a full one."""
    g = nt.LogicalGraph("phases")
    x = g.tensor([3], "x", "fp64", external=True)
    total = g.tensor([3], "total", "fp64", persistent=True)
    h = nt.ops.gelu(x, "h")
    nt.ops.relu(x, "r").mark_output()
    with g.phase("backward"):
        nt.ops.add_inplace(1.0, h, 1.0, total)
    cg = nt.compile(g, comm=nt.SimulatedWorld(1))
    assert cg.plan.dead_ops("forward") == ["gelu_0"]
    assert cg.plan.dead_ops() == []
    cg.bind_data("x", np.ones(3))
    cg.bind_data("total", np.zeros(3))
    cg.execute(phases="forward")
    assert cg.get_stats(0).by_op_type.keys() == {"relu"}
    cg.execute()
    np.testing.assert_allclose(cg.get_output("total"), 0.8413447460685429, rtol=1e-12)
