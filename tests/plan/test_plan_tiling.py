"""Tiling: DimensionTiling factories, manual/auto strategies, axis classes (plain pytest)."""

import numpy as np
import pytest
from scipy.special import erf

import nntile_spmd as nt
from nntile_spmd import DimensionTiling, TilingStrategy

# factory, arguments, expected boundaries
DIMENSION_TILINGS = [
    (DimensionTiling.uniform, (10, 3), (0, 3, 6, 9, 10)),
    (DimensionTiling.uniform, (9, 3), (0, 3, 6, 9)),
    (DimensionTiling.uniform, (5, 8), (0, 5)),
    (DimensionTiling.uniform, (1, 1), (0, 1)),
    (DimensionTiling.explicit, ([0, 2, 7, 10],), (0, 2, 7, 10)),
    (DimensionTiling.explicit, ((0, 4),), (0, 4)),
    (DimensionTiling.proportional, (10, [1, 1, 2]), (0, 2, 5, 10)),
    (DimensionTiling.proportional, (12, [1, 2, 3]), (0, 2, 6, 12)),
    (DimensionTiling.proportional, (7, [1, 1, 1]), (0, 2, 5, 7)),
    (DimensionTiling.proportional, (3, [1, 100, 1]), (0, 1, 2, 3)),   # every tile >= 1
    (DimensionTiling.proportional, (5, [1]), (0, 5)),
]


@pytest.mark.parametrize("factory, args, boundaries", DIMENSION_TILINGS)
def test_dimension_tiling_factories(factory, args, boundaries):
    tiling = factory(*args)
    assert tiling.boundaries == boundaries
    assert tiling.num_tiles == len(boundaries) - 1 and tiling.size == boundaries[-1]
    sizes = [tiling.tile_size(i) for i in range(tiling.num_tiles)]
    assert sizes == [b - a for a, b in zip(boundaries, boundaries[1:])] and min(sizes) >= 1
    for index in range(tiling.num_tiles):
        assert tiling.tile_of(boundaries[index]) == index
        assert tiling.tile_of(boundaries[index + 1] - 1) == index


@pytest.mark.parametrize("factory, args", [
    (DimensionTiling.uniform, (10, 0)),
    (DimensionTiling.explicit, ([0, 5, 5, 10],)),
    (DimensionTiling.explicit, ([1, 5],)),
    (DimensionTiling.explicit, ([0],)),
    (DimensionTiling.proportional, (2, [1, 1, 1])),
])
def test_dimension_tiling_rejects_bad_cuts(factory, args):
    with pytest.raises(ValueError):
        factory(*args)


def elementwise_graph(shape=(8, 6), dtype="fp32"):
    g = nt.LogicalGraph("pair")
    x = g.tensor(list(shape), "x", dtype=dtype, external=True)
    y = g.tensor(list(shape), "y", dtype=dtype, external=True)
    nt.ops.gelu(nt.ops.add(1.0, x, 1.0, y, "z"), "a").mark_output()
    return g


def test_one_tiling_per_axis_class():
    plan = nt.build_plan(elementwise_graph(), 1, TilingStrategy.manual({"x": [3, 4]}))
    for name in "xyza":
        assert plan.tilings[name].grid == (3, 2)
        assert plan.tilings[name].tile_shape((2, 1)) == (2, 2)   # uneven last tiles


def test_manual_conflict_names_both_tensors():
    with pytest.raises(ValueError, match=r"(?s)conflicting.*\bx dim 0.*\by dim 0"):
        nt.build_plan(elementwise_graph(), 1, TilingStrategy.manual({"x": [4, 6], "y": [2, 6]}))


def test_manual_agreeing_requests_are_fine():
    plan = nt.build_plan(elementwise_graph(), 1, TilingStrategy.manual({"x": [4, 3], "y": [4, 3]}))
    assert plan.tilings["a"].grid == (2, 2)


def test_manual_axes_nobody_names_stay_whole():
    g = nt.LogicalGraph("mm")
    a = g.tensor([6, 5], "a", external=True)
    b = g.tensor([5, 7], "b", external=True)
    nt.ops.gemm(a, b, "c").mark_output()
    plan = nt.build_plan(g, 1, TilingStrategy.manual({"a": [2, 5]}))
    assert plan.tilings["c"].grid == (3, 1) and plan.tilings["b"].grid == (1, 1)


def softmax_graph(shape=(64, 48)):
    g = nt.LogicalGraph("softmax")
    x = g.tensor(list(shape), "x", external=True)
    nt.ops.gelu(nt.ops.softmax(x, "p", axis=0), "y").mark_output()
    return g


@pytest.mark.parametrize("preset", ["single", "ddp", "fsdp", "tp"])
def test_softmax_axis_stays_one_tile(preset):
    plan = nt.build_plan(softmax_graph(), 4, TilingStrategy.auto(target_tile_bytes=64), preset)
    for name in "xpy":
        assert plan.tilings[name].grid[0] == 1, name
    assert plan.tilings["x"].grid[1] > 1


def test_manual_split_of_a_whole_axis_raises():
    with pytest.raises(ValueError, match="whole"):
        nt.build_plan(softmax_graph(), 1, TilingStrategy.manual({"x": [16, 48]}))


# shape, dtype, target bytes: auto tiles of the biggest tensor land in (target/2, target]
AUTO_CASES = [
    ((256, 256), "fp32", 16 << 10),
    ((256, 256), "fp64", 16 << 10),
    ((1000, 300), "fp32", 64 << 10),
    ((100, 7), "fp64", 512),
    ((4096, 64), "fp32", 1 << 20),
]


@pytest.mark.parametrize("shape, dtype, target", AUTO_CASES)
def test_auto_tiles_near_target_bytes(shape, dtype, target):
    plan = nt.build_plan(elementwise_graph(shape, dtype), 1, TilingStrategy.auto(target))
    itemsize = 8 if dtype == "fp64" else 4
    spec = plan.tilings["x"]
    tile_bytes = itemsize * spec.tile_shape_max[0] * spec.tile_shape_max[1]
    total = itemsize * shape[0] * shape[1]
    assert tile_bytes <= max(target, itemsize)
    assert tile_bytes > target // 2 or tile_bytes == total, (spec, tile_bytes)


def test_auto_keeps_small_tensors_whole():
    plan = nt.build_plan(elementwise_graph((8, 6)), 1, TilingStrategy.auto())
    assert plan.tilings["x"].grid == (1, 1)


@pytest.mark.parametrize("preset", ["ddp", "fsdp"])
@pytest.mark.parametrize("nranks", [2, 3, 4, 7, 8])
def test_auto_splits_the_preset_axis_per_rank(preset, nranks):
    g = nt.LogicalGraph("layer")
    x = g.tensor([64, 30], "x", external=True)                      # (features, batch)
    w = g.tensor([16, 64], "w", requires_grad=True, persistent=True)
    nt.ops.gemm(w, x, "y").mark_output()
    plan = nt.build_plan(g, nranks, TilingStrategy.auto(), preset)   # 1 MiB target: no need
    assert plan.tilings["x"].grid[1] >= nranks
    assert plan.tilings["w"].grid == (1, 1)
    owners = plan.owners["x"]
    assert set(owners.reshape(-1).tolist()) == set(range(nranks))   # every rank gets a share


def test_auto_split_axis_smaller_than_world():
    g = nt.LogicalGraph("tiny")
    x = g.tensor([4, 3], "x", external=True)
    nt.ops.relu(x, "y").mark_output()
    plan = nt.build_plan(g, 8, TilingStrategy.auto(), "ddp")
    assert plan.tilings["x"].grid == (1, 3)


def test_constrained_and_load_balanced_strategies():
    g = nt.LogicalGraph("layer")
    x = g.tensor([64, 40], "x", external=True)
    nt.ops.gelu(x, "y").mark_output()
    plan = nt.build_plan(g, 2, TilingStrategy.constrained({"x": [16, 40]}, 1 << 20), "single")
    assert plan.tilings["y"].grid == (4, 1)
    profile = nt.DevicePerformanceProfile((1.0, 3.0))
    plan = nt.build_plan(g, 2, TilingStrategy.load_balanced(profile), "ddp")
    assert plan.tilings["x"].dims[1].boundaries == (0, 10, 40)


EXPLICIT = {"x": [[0, 1, 5, 8], None], "w": [[0, 2, 5], None]}   # x [8, 7], w [5, 8]


@pytest.mark.parametrize("preset", ["single", "ddp", "fsdp", "tp"])
def test_explicit_boundaries_with_every_preset(preset):
    """TilingStrategy.explicit fixes the named dims exactly under any preset; the other
    axes are chosen as by auto, and the result is still right."""
    g = nt.LogicalGraph("explicit")
    x = g.tensor([8, 7], "x", "fp64", external=True)
    w = g.tensor([5, 8], "w", "fp64", persistent=True)
    nt.ops.gelu(nt.ops.gemm(w, x, "h"), "y").mark_output()
    cg = nt.compile(g, comm=nt.SimulatedWorld(3), distribution=preset,
                    tiling=nt.TilingStrategy.explicit(EXPLICIT, target_tile_bytes=64))
    assert cg.plan.tilings["x"].dims[0].boundaries == (0, 1, 5, 8)
    # w's K axis is x's first axis
    assert [d.boundaries for d in cg.plan.tilings["w"].dims] == [(0, 2, 5), (0, 1, 5, 8)]
    if preset in ("ddp", "fsdp"):   # the free batch axis: auto, one tile per rank at least
        assert cg.plan.tilings["x"].dims[1].num_tiles >= 3
    rng = np.random.default_rng(0)
    xs, ws = rng.standard_normal((8, 7)), rng.standard_normal((5, 8))
    cg.bind_data("x", xs)
    cg.bind_data("w", ws)
    cg.execute()
    h = ws @ xs
    np.testing.assert_allclose(cg.get_output("y"), 0.5 * h * (1 + erf(h / np.sqrt(2))),
                               rtol=1e-12)
    for rank in range(3):
        cg.check_stats(rank)


@pytest.mark.parametrize("request_, message", [
    ({"x": [[0, 2, 9], None]}, "boundaries \\[0, 2, 9\\] must end at the axis size 8"),
    ({"x": [[0, 4, 4, 8], None]}, "dim 0: bad tile boundaries"),
    ({"x": [[0, 4, 8]]}, "has 1 dims"),
])
def test_explicit_boundaries_errors(request_, message):
    g = nt.LogicalGraph("bad")
    x = g.tensor([8, 7], "x", "fp64", external=True)
    nt.ops.relu(x, "y")
    with pytest.raises(ValueError, match=message):
        nt.build_plan(g, 2, nt.TilingStrategy.explicit(request_), "ddp")
