"""randn: the same tensor on every tiling and rank count (counter-based numbers keyed by
the global index), NNTile's start/underlying_shape blocks, plausible N(mean, stddev)
statistics, and build-time validation."""

import numpy as np
import pytest

import nntile_spmd as nt
from nntile_kernels import reference
from nntile_spmd import ops

SHAPE = (7, 5, 4)


def generated(ranks, tiles, shape=SHAPE, **attrs):
    g = nt.LogicalGraph("randn")
    x = g.tensor(list(shape), "x", "fp64", persistent=True)
    ops.randn(x, **attrs)
    x.mark_output()
    distribution = "single" if ranks == 1 else {"x": nt.TileDistribution.round_robin()}
    cg = nt.compile(g, comm=nt.SimulatedWorld(ranks), distribution=distribution,
                    tiling=nt.TilingStrategy.manual({"x": tiles}) if tiles else None)
    cg.execute()
    return cg.get_output("x")


def whole(shape, **params):
    out = np.empty(shape, order="F")
    reference.KERNELS["randn"](out, **params)
    return out


@pytest.mark.parametrize("ranks, tiles", [(1, None), (1, [2, 5, 3]), (2, [3, 2, 4]),
                                          (3, [2, 3, 1]), (3, [7, 1, 3])])
def test_same_tensor_on_any_tiling_and_rank_count(ranks, tiles):
    got = generated(ranks, tiles, seed=42, mean=0.5, stddev=2.0)
    np.testing.assert_array_equal(got, whole(SHAPE, seed=42, mean=0.5, stddev=2.0))


@pytest.mark.parametrize("ranks, tiles", [(1, None), (3, [2, 3, 1])])
def test_block_of_an_underlying_tensor(ranks, tiles):
    big = whole((10, 8, 6), seed=9)
    got = generated(ranks, tiles, seed=9, start=(3, 2, 1), underlying_shape=(10, 8, 6))
    np.testing.assert_array_equal(got, big[3:10, 2:7, 1:5])


def test_seeds_differ_and_statistics_are_standard_normal():
    a, b = whole((400, 250), seed=1), whole((400, 250), seed=2)
    assert not np.array_equal(a, b)
    for sample in (a, b):   # 1e5 draws: mean within 5 standard errors, std within 2%
        assert abs(sample.mean()) < 5 / np.sqrt(sample.size)
        assert abs(sample.std() - 1) < 0.02
        assert abs(np.corrcoef(sample[:-1].ravel(), sample[1:].ravel())[0, 1]) < 0.02
        assert abs((sample > 1.96).mean() - 0.025) < 0.003   # the tail of a normal


def test_randn_validates_at_build_time():
    g = nt.LogicalGraph("bad")
    x = g.tensor([4, 3], "x", "fp64")
    with pytest.raises(TypeError, match="randn: dst must be an existing tensor"):
        ops.randn("y", 1)
    with pytest.raises(ValueError, match=r"randn: seed=-1 must be an int >= 0 \(x\[4, 3\]"):
        ops.randn(x, -1)
    with pytest.raises(ValueError, match="randn: start=.* must have 2 entries"):
        ops.randn(x, 1, start=(0,))
    with pytest.raises(ValueError, match=r"randn: the block at start=\(1, 0\) does not fit"):
        ops.randn(x, 1, start=(1, 0), underlying_shape=(4, 3))
    assert g.num_operations() == 0


def test_tuple_attributes_survive_save_and_load(tmp_path):
    """randn's start/underlying_shape and scale_fiber's shape are written as JSON lists
    and read back as the tuples they were."""
    g = nt.LogicalGraph("tuples")
    x = g.tensor([4, 3], "x", "fp64")
    ops.randn(x, 5, start=(1, 0), underlying_shape=(6, 3))
    ops.scale_fiber(2.0, g.tensor([3], "f", "fp64"), "y", axis=1, shape=(4, 3))
    g.save(tmp_path / "g.json")
    loaded = nt.LogicalGraph.load(tmp_path / "g.json")
    assert loaded.to_json() == g.to_json()
    assert [op.attrs for op in loaded.ops()] == [op.attrs for op in g.ops()]
    assert loaded.ops()[0].attrs["start"] == (1, 0)
