"""nt.recompute(graph, segments): the graph transform itself (GPT-2: tests/models)."""

import numpy as np
import pytest

import nntile_spmd as nt
from nntile_spmd.graph.recompute import recomputed_ops


def build(segments):
    g = nt.LogicalGraph("mlp")
    x = g.tensor([6, 8], "x", dtype="fp64", external=True)
    w1 = g.tensor([5, 6], "w1", dtype="fp64", requires_grad=True, persistent=True)
    w2 = g.tensor([3, 5], "w2", dtype="fp64", requires_grad=True, persistent=True)
    a = nt.ops.gelu(nt.ops.gemm(w1, x, "s1_h"), "s1_a")
    z = nt.ops.gelu(nt.ops.gemm(w2, a, "s2_y"), "s2_z")
    z.mark_output()
    grads = nt.grad(g, z, [w1, w2])
    if segments is not None:
        nt.recompute(g, segments)
    return g, grads


def run(g, grads):
    rng = np.random.default_rng(0)
    cg = nt.compile(g, comm=nt.SimulatedWorld(1))
    for name, shape in (("x", (6, 8)), ("w1", (5, 6)), ("w2", (3, 5))):
        cg.bind_data(name, rng.standard_normal(shape))
    cg.execute()
    return [cg.get_output(t.name) for t in grads], cg


def test_copies_are_inserted_before_backward_and_read_there():
    g, grads = build(["s1_"])
    copies = recomputed_ops(g)
    assert copies and set(copies.values()) <= {op.name for op in g.ops()
                                               if op.phase == "forward"}
    names = [op.name for op in g.ops()]
    backward = [op for op in g.ops() if op.phase == "backward"]
    for copy in copies:
        assert g.get_op(copy).phase == "backward"
        assert names.index(copy) > max(names.index(o.name) for o in g.ops()
                                       if o.phase == "forward")
    read = {t.name for op in backward for t in op.reads}
    assert "s1_h" not in read and "s1_h_recompute" in read
    assert [op.id for op in g.ops()] == list(range(len(g.ops())))
    plain, _ = run(*build(None))
    again, cg = run(g, grads)
    assert all(np.array_equal(p, q) for p, q in zip(plain, again))
    assert cg.plan.recompute_flops() > 0


def test_errors_name_the_problem():
    g = nt.LogicalGraph("g")
    x = g.tensor([4], "x", dtype="fp64", external=True)
    nt.ops.gelu(x, "y")
    with pytest.raises(ValueError, match="no backward ops"):
        nt.recompute(g, ["y"])
    g, _ = build(None)
    with pytest.raises(ValueError, match="matches no forward op"):
        nt.recompute(g, ["nothing_"])
    with pytest.raises(ValueError, match="not forward ops"):
        nt.recompute(g, [["no_such_op"]])


def test_an_input_overwritten_later_is_refused():
    g = nt.LogicalGraph("g")
    x = g.tensor([4, 3], "x", dtype="fp64", requires_grad=True, persistent=True)
    c = g.tensor([4, 3], "c", dtype="fp64", persistent=True)
    h = nt.ops.multiply(x, c, "s_h")
    y = nt.ops.multiply(h, h, "s_y")
    nt.ops.add_inplace(1.0, y, 1.0, c)   # c changes after the segment read it
    y.mark_output()
    nt.grad(g, y, [x])
    with pytest.raises(ValueError, match="overwrites before backward"):
        nt.recompute(g, ["s_"])
