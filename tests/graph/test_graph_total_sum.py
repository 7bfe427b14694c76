"""total_sum_accum against NumPy on 1 rank and on 3 simulated ranks with uneven tiles
that split the class axis, plus its build-time validation."""

import numpy as np
import pytest

import nntile_spmd as nt
from nntile_spmd import ops

RNG = np.random.default_rng(3)
CLASSES, T, B = 7, 5, 2


def total_sum_numpy(alpha, lse, src, labels, val, ignore_index):
    valid = labels != ignore_index
    picked = np.take_along_axis(src, np.where(valid, labels, 0)[None], axis=0)[0]
    return val + alpha * np.where(valid, lse - picked, 0).sum()


@pytest.mark.parametrize("ranks, tiles", [(1, None), (3, [3, 2, 1])],
                         ids=["1rank", "3ranks"])
def test_total_sum_accum_matches_numpy(ranks, tiles):
    g = nt.LogicalGraph("total")
    lse = g.tensor([T, B], "lse", "fp64", external=True)
    src = g.tensor([CLASSES, T, B], "src", "fp64", external=True)
    labels = g.tensor([T, B], "labels", "int64", external=True)
    val = g.tensor([], "val", "fp64", persistent=True)
    ops.total_sum_accum(-0.5, lse, src, labels, val, ignore_index=-1)
    val.mark_output()
    distribution = "single" if ranks == 1 else \
        {tensor.name: nt.TileDistribution.round_robin() for tensor in g.tensors()}
    cg = nt.compile(g, comm=nt.SimulatedWorld(ranks), distribution=distribution,
                    tiling=nt.TilingStrategy.manual({"src": tiles}) if tiles else None)
    arrays = {"lse": RNG.standard_normal((T, B)), "src": RNG.standard_normal((CLASSES, T, B)),
              "labels": RNG.integers(-1, CLASSES, (T, B)), "val": np.array(1.25)}
    for name, value in arrays.items():
        cg.bind_data(name, value)
    expected = total_sum_numpy(-0.5, arrays["lse"], arrays["src"], arrays["labels"], 1.25, -1)
    cg.execute()
    np.testing.assert_allclose(cg.get_output("val"), expected, rtol=1e-13)
    cg.execute()   # it accumulates: a second run adds the same sum again
    np.testing.assert_allclose(cg.get_output("val"), 2 * expected - 1.25, rtol=1e-13)


def test_total_sum_accum_validates():
    g = nt.LogicalGraph("bad")
    lse = g.tensor([T], "lse", "fp64")
    src = g.tensor([CLASSES, T], "src", "fp64")
    labels = g.tensor([T], "labels", "int64")
    with pytest.raises(TypeError, match="total_sum_accum: val must be an existing 0-d"):
        ops.total_sum_accum(1.0, lse, src, labels, "val")
    with pytest.raises(ValueError, match=r"total_sum_accum: v must be a 0-d .*v\[1\]"):
        ops.total_sum_accum(1.0, lse, src, labels, g.tensor([1], "v", "fp64"))
    with pytest.raises(ValueError, match="total_sum_accum: alpha=0 must be a nonzero"):
        ops.total_sum_accum(0, lse, src, labels, g.tensor([], "w", "fp64"))
    assert g.num_operations() == 0
