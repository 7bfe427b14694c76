"""How the data-movement ops are planned: reshape and slice as views (no task, no tile,
no transfer) when every output tile is an input tile and as planned copies otherwise;
copies fetch only the input tiles they overlap; log_scalar keeps a value as it was at
its point of the program; build-time errors name the op and the tensors."""

import numpy as np
import pytest
from helpers import stat_problems

import nntile_spmd as nt
from nntile_spmd import ops

RNG = np.random.default_rng(3)
PRESETS = ["single", "ddp", "fsdp", "tp"]
SHAPE = (6, 4)


def view_graph(make_view):
    """x -> h = 2x -> y = view(h) -> z = 3y (output): y is an intermediate."""
    g = nt.LogicalGraph("views")
    x = g.tensor(list(SHAPE), "x", "fp64", external=True)
    y = make_view(ops.scale(x, "h", 2.0))
    ops.scale(y, "z", 3.0).mark_output()
    return g


# (id, view builder, numpy, tiles where every y tile is an h tile, tiles where none is)
VIEWS = [
    ("reshape", lambda h: ops.reshape(h, "y", [3, 8]), lambda x: x.reshape(3, 8, order="F"),
     {"x": [6, 1], "y": [3, 2]}, {"x": [3, 2], "y": [3, 4]}),
    ("reshape_split_inner", lambda h: ops.reshape(h, "y", [2, 3, 4]),
     lambda x: x.reshape(2, 3, 4, order="F"), {"x": [6, 2], "y": [2, 3, 2]},
     {"x": [6, 2], "y": [1, 3, 2]}),
    ("slice", lambda h: ops.slice(h, "y", 1, 1, 4), lambda x: x[:, 1:4],
     {"x": [3, [0, 1, 3, 4]], "y": [3, [0, 2, 3]]}, {"x": [3, 2], "y": [3, 2]}),
]
IDS = [view[0] for view in VIEWS]


def compile_view(make_view, tiles, ranks, preset):
    g = view_graph(make_view)
    return nt.compile(g, comm=nt.SimulatedWorld(ranks), distribution=preset,
                      tiling=nt.TilingStrategy.explicit(tiles))


def view_op_execs(cg, ranks):
    """EXEC instructions of the view op (reshape/slice) on every rank."""
    op_name = next(op.name for op in cg.graph.ops() if op.op_type in ("reshape", "slice"))
    return [ins for rank in range(ranks) for ins in cg.plan.program(rank)
            if type(ins).__name__ == "Exec" and ins.op_name == op_name]


@pytest.mark.parametrize("ranks", [1, 3])
@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("case_id, make_view, numpy, aligned, misaligned", VIEWS, ids=IDS)
def test_view_when_tiles_line_up_and_copy_otherwise(case_id, make_view, numpy, aligned,
                                                    misaligned, preset, ranks):
    x = RNG.standard_normal(SHAPE)
    results = {}
    for kind, tiles in (("view", aligned), ("copy", misaligned)):
        cg = compile_view(make_view, tiles, ranks, preset)
        cg.bind_data("x", x)
        cg.execute()
        np.testing.assert_array_equal(cg.get_output("z"), 6.0 * numpy(x))
        assert stat_problems(cg) == []
        results[kind] = cg
    view, copy = results["view"], results["copy"]
    assert view.plan.views.names == {"y"} and not copy.plan.views
    assert view_op_execs(view, ranks) == [] and view_op_execs(copy, ranks) != []
    for rank in range(ranks):   # y's tiles are h's tiles: never allocated, never sent
        program = "\n".join(map(str, view.plan.program(rank)))
        assert " y[" not in program and "(y[" not in program


def test_a_view_costs_no_memory():
    """On one rank the view plans the peak of the same graph without the view op (z = 3h
    directly); the copy needs y's tiles on top."""
    case_id, make_view, _, aligned, _ = VIEWS[0]
    view = compile_view(make_view, aligned, 1, "single")
    copy = compile_view(make_view, {"x": [3, 1], "y": [3, 2]}, 1, "single")
    g = nt.LogicalGraph("views")
    x = g.tensor(list(SHAPE), "x", "fp64", external=True)
    ops.scale(ops.scale(x, "h", 2.0), "z", 3.0).mark_output()
    plain = nt.compile(g, comm=nt.SimulatedWorld(1),
                       tiling=nt.TilingStrategy.explicit({"x": aligned["x"]}))
    assert view.memory_on_rank(0) == plain.memory_on_rank(0) < copy.memory_on_rank(0)


@pytest.mark.parametrize("preset", PRESETS)
def test_a_view_needs_no_more_memory_or_bytes_than_the_copy_on_any_rank(preset):
    case_id, make_view, _, aligned, _ = VIEWS[0]
    view = compile_view(make_view, aligned, 3, preset)
    g = view_graph(make_view)   # the same tiles, with the view turned off: y is an output
    g.get_tensor("y").mark_output()
    copy = nt.compile(g, comm=nt.SimulatedWorld(3), distribution=preset,
                      tiling=nt.TilingStrategy.explicit(aligned))
    assert view.plan.views and not copy.plan.views
    for rank in range(3):
        assert view.memory_on_rank(rank) <= copy.memory_on_rank(rank)
    assert view.estimate_communication() <= copy.estimate_communication()


def test_no_view_when_aliasing_could_be_seen():
    """y = reshape(h) stays a copy when h changes while y is in use, or y is an output."""
    g = nt.LogicalGraph("aliasing")
    x = g.tensor(list(SHAPE), "x", "fp64", external=True)
    h = ops.scale(x, "h", 2.0)
    y = ops.reshape(h, "y", [3, 8])
    ops.scale_inplace(h, 10.0)                       # h changes while y is in use
    ops.scale(y, "z", 3.0).mark_output()
    h.mark_output()
    g2 = nt.LogicalGraph("output")
    x2 = g2.tensor(list(SHAPE), "x", "fp64", external=True)
    ops.reshape(ops.scale(x2, "h", 2.0), "y", [3, 8]).mark_output()
    tiles = {"x": [6, 1], "y": [3, 2]}
    for graph in (g, g2):
        cg = nt.compile(graph, comm=nt.SimulatedWorld(2), distribution="ddp",
                        tiling=nt.TilingStrategy.explicit(tiles))
        assert not cg.plan.views
        values = RNG.standard_normal(SHAPE)
        cg.bind_data("x", values)
        cg.execute()
        name = "z" if graph is g else "y"
        scale = 6.0 if graph is g else 2.0
        np.testing.assert_array_equal(cg.get_output(name),
                                      scale * values.reshape(3, 8, order="F"))


def test_views_pass_gradients():
    """nt.grad through a reshape view and a slice view equals the 1-rank gradient."""
    grads = []
    for ranks, tiles in ((1, None), (3, {"x": [6, 1], "y": [3, 2], "s": [3, 2]})):
        g = nt.LogicalGraph("view_grad")
        x = g.tensor(list(SHAPE), "x", "fp64", requires_grad=True, persistent=True)
        y = ops.reshape(ops.gelu(x, "h"), "y", [3, 8])
        s = ops.slice(ops.scale(y, "w", 1.5), "s", 1, 2, 6)
        loss = ops.mse_loss(s, g.tensor([3, 4], "t", "fp64", external=True), "loss")
        (dx,) = nt.grad(g, loss, [x])
        cg = nt.compile(g, comm=nt.SimulatedWorld(ranks), distribution="tp",
                        tiling=tiles and nt.TilingStrategy.explicit(tiles))
        if ranks == 3:
            assert cg.plan.views.names == {"y", "s"}
        rng = np.random.default_rng(1)
        cg.bind_data("x", rng.standard_normal(SHAPE))
        cg.bind_data("t", rng.standard_normal((3, 4)))
        cg.execute()
        grads.append(cg.get_output(dx.name))
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-13, atol=1e-13)


def test_copies_fetch_only_the_input_tiles_they_overlap():
    """slice(x, 3:5) of 8 one-column tiles: the one output tile reads x tiles 3 and 4."""
    g = nt.LogicalGraph("prune")
    x = g.tensor([2, 8], "x", "fp64", external=True)
    ops.slice(x, "y", 1, 3, 5).mark_output()
    cg = nt.compile(g, comm=nt.SimulatedWorld(4),
                    distribution={"x": nt.TileDistribution.round_robin(),
                                  "y": nt.TileDistribution.on_rank(0)},
                    tiling=nt.TilingStrategy.explicit({"x": [2, 1], "y": [2, 2]}))
    execs = [ins for ins in cg.plan.program(0) if type(ins).__name__ == "Exec"]
    read = sorted(key for ins in execs for key in ins.reads if key[0] == "x")
    assert read == [("x", (0, 3)), ("x", (0, 4))]
    assert cg.estimate_communication() == 2 * 8   # tile 4 is on rank 0: only tile 3 moves
    values = RNG.standard_normal((2, 8))
    cg.bind_data("x", values)
    cg.execute()
    np.testing.assert_array_equal(cg.get_output("y"), values[:, 3:5])


@pytest.mark.parametrize("ranks", [1, 3])
@pytest.mark.parametrize("preset", PRESETS)
def test_gather_and_scatter_move_tiles_to_and_from_one_tile(ranks, preset):
    g = nt.LogicalGraph("retile")
    x = g.tensor([5, 7], "x", "fp64", external=True)
    whole = ops.gather(ops.scale(x, "h", 2.0), "whole")
    ops.scatter(ops.scale(whole, "w2", 0.5), "back").mark_output()
    cg = nt.compile(g, comm=nt.SimulatedWorld(ranks), distribution=preset,
                    tiling=nt.TilingStrategy.explicit({"x": [[0, 2, 5], [0, 3, 4, 7]],
                                                       "back": [3, 2]}))
    assert cg.plan.tilings["whole"].grid == (1, 1) and cg.plan.tilings["back"].grid == (2, 4)
    values = RNG.standard_normal((5, 7))
    cg.bind_data("x", values)
    cg.execute()
    np.testing.assert_array_equal(cg.get_output("back"), values)
    assert stat_problems(cg) == []


@pytest.mark.parametrize("ranks", [1, 3])
@pytest.mark.parametrize("preset", PRESETS)
def test_log_scalar_keeps_the_value_at_its_point_of_the_program(ranks, preset):
    g = nt.LogicalGraph("log")
    x = g.tensor([6, 4], "x", "fp64", external=True)
    total = ops.sum(x, "total")
    ops.log_scalar(total, "total_before")
    ops.scale_inplace(total, -2.0)
    ops.log_scalar(total, "total_after")
    cg = nt.compile(g, comm=nt.SimulatedWorld(ranks), distribution=preset,
                    tiling=nt.TilingStrategy.manual({"x": [4, 3]}))
    assert cg.logged_scalars() == {}                 # nothing ran yet
    for _ in range(2):   # the second execute logs the second values
        values = RNG.standard_normal((6, 4))
        cg.bind_data("x", values)
        cg.execute()
        logged = cg.logged_scalars()
        assert list(logged) == ["total_before", "total_after"]
        assert logged["total_before"] == pytest.approx(values.sum(), rel=1e-13)
        assert logged["total_after"] == pytest.approx(-2.0 * values.sum(), rel=1e-13)


def test_build_errors_name_the_op_and_the_tensors():
    g = nt.LogicalGraph("bad")
    x = g.tensor([4, 3], "x", "fp64")
    ints = g.tensor([4, 3], "ids", "int64")
    with pytest.raises(ValueError, match=r"slice: stop=5 must be an int in \[2, 4\] \(x\[4, 3\]"):
        ops.slice(x, "y", 0, 1, 5)
    with pytest.raises(ValueError, match="slice: axis=2 out of range"):
        ops.slice(x, "y", 2, 0, 1)
    with pytest.raises(TypeError, match="slice: ids must be a floating-point tensor"):
        ops.slice(ints, "y", 0, 0, 1)
    with pytest.raises(ValueError, match=r"reshape: shape \[5, 2\] holds 10 elements, x 12"):
        ops.reshape(x, "y", [5, 2])
    with pytest.raises(ValueError, match=r"slice_backward: the output's axis 1 \(size 3\) "
                       r"cannot hold d's 2 entries from start=2 \(d\[4, 2\]"):
        ops.slice_backward(g.tensor([4, 2], "d", "fp64"), x, 1, 2)
    with pytest.raises(ValueError, match=r"slice_backward: output x must be \[2, 3\]"):
        ops.slice_backward(g.tensor([2, 2], "d2", "fp64"), x, 1, 0)
    with pytest.raises(ValueError, match="concat: w must match x in every dim but axis 0"):
        ops.concat([x, g.tensor([4, 2], "w", "fp64")], "y", axis=0)
    with pytest.raises(TypeError, match="concat: dtypes differ"):
        ops.concat([x, g.tensor([4, 3], "f", "fp32")], "y", axis=0)
    with pytest.raises(ValueError, match="log_scalar: x must be a 0-d tensor"):
        ops.log_scalar(x, "y")
    with pytest.raises(ValueError, match=r"gather: beta=1.0 needs an existing output"):
        ops.gather(x, "y", beta=1.0)
    with pytest.raises(ValueError, match=r"batch_norm: g must have shape \[3\]"):
        ops.batch_norm(x, g.tensor([4], "g", "fp64"), g.tensor([3], "b", "fp64"), "y", axis=1)
    assert not g.has_tensor("y")


@pytest.mark.parametrize("preset", PRESETS)
def test_one_rank_alone_plans_the_same_views_and_copies(preset):
    """build_plan(rank=r) (a real MPI rank, PlanningWorld) derives the all-ranks program."""
    g = view_graph(VIEWS[0][1])
    ops.slice(g.get_tensor("h"), "s", 1, 1, 3).mark_output()      # and a copy
    # each part of the concat meets only one of c's row tiles: groups without steps
    ops.concat([g.get_tensor("h"), g.get_tensor("x")], "c", axis=0).mark_output()
    tiling = nt.TilingStrategy.explicit(dict(VIEWS[0][3], c=[[0, 6, 12], None]))
    oracle = nt.build_plan(g, 3, tiling, preset).programs()
    for rank in range(3):
        alone = nt.build_plan(g, 3, tiling, preset, rank=rank)
        assert alone.views.names == {"y"}
        assert alone.program(rank) == oracle[rank]
