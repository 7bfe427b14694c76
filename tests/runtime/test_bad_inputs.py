"""Bad inputs fail fast with a message that says what is wrong (single process)."""

import time

import numpy as np
import pytest

import nntile_spmd as nt
from nntile_spmd.runtime.limits import check_fits_in_memory


def relu_graph(size=4, name="v"):
    g = nt.LogicalGraph(name)
    x = g.tensor([size], "x", dtype="fp64", external=True)
    nt.ops.relu(x, "y").mark_output()
    return g


def test_huge_tensor_fails_fast_naming_planned_and_available_bytes():
    g = nt.LogicalGraph("big")
    nt.ops.relu(g.tensor([10**12], "x", dtype="fp32", external=True), "y").mark_output()
    start = time.perf_counter()
    with pytest.raises(nt.PlanError, match=r"needs at least 8,000,000,000,000 bytes .* "
                       r"x\[1000000000000\]:fp32 alone is 4,000,000,000,000 bytes\) but "
                       r"[\d,]+ bytes of memory are available"):
        nt.compile(g, comm=nt.SimulatedWorld(1))
    assert time.perf_counter() - start < 1.0


def test_memory_bound_spreads_over_ranks_and_counts_simulated_ones():
    g = relu_graph(1000)     # x and y kept: 16,000 bytes in all
    check_fits_in_memory(g, 4, 1, available=4000)          # 4,000 bytes per rank
    with pytest.raises(nt.PlanError, match="needs at least 4,000 bytes"):
        check_fits_in_memory(g, 4, 1, available=3999)
    with pytest.raises(nt.PlanError, match="needs at least 16,000 bytes .*4 of 4 rank"):
        check_fits_in_memory(g, 4, 4, available=15999)     # all 4 ranks in this process


@pytest.fixture
def executed():
    cg = nt.compile(relu_graph(), comm=nt.SimulatedWorld(2))
    cg.bind_data("x", np.arange(4.0))
    return cg


def test_get_output_before_execute_raises():
    cg = nt.compile(relu_graph(), comm=nt.SimulatedWorld(2))
    cg.bind_data("x", np.arange(4.0))
    with pytest.raises(RuntimeError, match="no execute.. has computed it yet"):
        cg.get_output("y")
    assert np.array_equal(cg.get_output("x"), np.arange(4.0))   # bound: readable
    cg.execute()
    assert np.array_equal(cg.get_output("y"), np.arange(4.0))


@pytest.mark.parametrize("root", [-1, 2, 2.0, "0"])
def test_get_output_rejects_a_root_outside_the_world(executed, root):
    executed.execute()
    with pytest.raises(ValueError, match=r"root must be a rank in \[0, 1\] or None"):
        executed.get_output("y", root=root)


@pytest.mark.parametrize("call", ["bind", "execute", "get_output", "local_tiles"])
def test_changing_the_graph_after_compile_says_so(executed, call):
    g = executed.graph
    nt.ops.relu(g.tensor([4], "z", dtype="fp64", external=True), "w").mark_output()
    action = {"bind": lambda: executed.bind_data("z", np.ones(4)),
              "execute": executed.execute,
              "get_output": lambda: executed.get_output("w"),
              "local_tiles": lambda: executed.local_tiles("w")}[call]
    with pytest.raises(RuntimeError, match="the graph 'v' changed since compile"):
        action()
