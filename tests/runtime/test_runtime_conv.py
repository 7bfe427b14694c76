"""conv2d and copy_intersection on tiled, distributed tensors against a one-process NumPy
reference (the reference kernels on whole arrays, themselves checked against loops in
tests/kernels/test_kernels_conv.py): 1 and 3 simulated ranks, uneven tiles on every
axis, every preset; planned traffic and memory equal the measured; the halo moves only
neighbouring tiles; gradients match central finite differences in fp64."""

import numpy as np
import pytest
from helpers import stat_problems

import nntile_spmd as nt
from nntile_kernels import reference
from nntile_spmd import ops

WHOLE = {"x_start": (0, 0), "c_start": (0, 0), "y_start": (0, 0)}
# (padding, stride, dilation): "same" 3x3, strided, dilated with uneven padding
GEOMETRIES = [((1, 1), (1, 1), (1, 1)), ((1, 0), (2, 1), (1, 1)), ((2, 1), (1, 2), (2, 1))]
PRESETS = ["single", "ddp", "fsdp", "tp"]


def numpy_conv(x, c, padding, stride, dilation):
    shape = [(x.shape[a] + 2 * padding[a] - dilation[a] * (c.shape[a] - 1) - 1) // stride[a] + 1
             for a in range(2)] + [c.shape[3], x.shape[3]]
    y = np.zeros(shape, order="F")
    reference.conv2d_inplace(x, c, y, padding=padding, stride=stride, dilation=dilation,
                             **WHOLE)
    return y


def numpy_grads(x, c, dy, padding, stride, dilation):
    dx, dc = np.zeros(x.shape, order="F"), np.zeros(c.shape, order="F")
    geometry = {"padding": padding, "stride": stride, "dilation": dilation, **WHOLE}
    reference.conv2d_bwd_input_inplace(dy, c, dx, **geometry)
    reference.conv2d_bwd_weight_inplace(x, dy, dc, **geometry)
    return dx, dc


def conv_graph(geometry, x_shape=(9, 7, 3, 5), c_shape=(3, 3, 3, 4)):
    """x -> y = conv2d(x, c) -> loss = mse(y, target), with grads of x and c."""
    padding, stride, dilation = geometry
    g = nt.LogicalGraph("conv")
    x = g.tensor(list(x_shape), "x", "fp64", external=True, requires_grad=True)
    c = g.tensor(list(c_shape), "c", "fp64", requires_grad=True, persistent=True)
    y = ops.conv2d(x, c, "y", padding=padding, stride=stride, dilation=dilation).mark_output()
    target = g.tensor(list(y.shape), "target", "fp64", external=True)
    loss = ops.mse_loss(y, target, "loss").mark_output()
    grads = nt.grad(g, loss, [x, c])
    return g, y, grads


def uneven_tiling(y_shape):
    """Every axis of x, c and y cut into uneven tiles."""
    return nt.TilingStrategy.manual({"x": [4, 3, 2, 2], "c": [2, 3, 2, 3],
                                     "y": [max(1, y_shape[0] // 2 + 1), 2, 3, 2]})


def run(geometry, ranks, preset, tiling_of=uneven_tiling):
    g, y, grads = conv_graph(geometry)
    cg = nt.compile(g, comm=nt.SimulatedWorld(ranks), distribution=preset,
                    tiling=tiling_of(y.shape))
    rng = np.random.default_rng(1)
    x = np.asfortranarray(rng.standard_normal((9, 7, 3, 5)))
    c = np.asfortranarray(rng.standard_normal((3, 3, 3, 4)))
    target = np.asfortranarray(rng.standard_normal(y.shape))
    for name, value in (("x", x), ("c", c), ("target", target)):
        cg.bind_data(name, value)
    cg.execute()
    cg.wait()
    return cg, grads, (x, c, target)


@pytest.mark.parametrize("geometry", GEOMETRIES, ids=["same", "strided", "dilated"])
@pytest.mark.parametrize("ranks, preset", [(1, "single")] + [(3, p) for p in PRESETS])
def test_conv2d_forward_and_grads_match_numpy(geometry, ranks, preset):
    cg, grads, (x, c, target) = run(geometry, ranks, preset)
    y = numpy_conv(x, c, *geometry)
    np.testing.assert_allclose(cg.get_output("y"), y, rtol=1e-12, atol=1e-12)
    dy = 2.0 * (y - target)   # mse_loss is the sum of the squares
    dx, dc = numpy_grads(x, c, dy, *geometry)
    got = {grad.grad_of: cg.get_output(grad.name) for grad in grads}
    np.testing.assert_allclose(got["x"], dx, rtol=1e-11, atol=1e-13)
    np.testing.assert_allclose(got["c"], dc, rtol=1e-11, atol=1e-13)
    assert stat_problems(cg) == []


def test_gradients_match_finite_differences():
    """fp64 central differences of the loss on 3 ranks, uneven tiles, strided geometry."""
    geometry = GEOMETRIES[1]
    cg, grads, (x, c, target) = run(geometry, 3, "fsdp")
    analytic = {grad.grad_of: cg.get_output(grad.name) for grad in grads}
    rng = np.random.default_rng(7)
    eps = 1e-6
    for name, value in (("x", x), ("c", c)):
        for _ in range(6):   # a sample of entries: every one costs two executes
            index = tuple(int(rng.integers(n)) for n in value.shape)
            losses = []
            for sign in (1, -1):
                moved = value.copy()
                moved[index] += sign * eps
                cg.bind_data(name, moved)
                cg.execute(phases=["forward"])
                losses.append(float(cg.get_output("loss")))
            cg.bind_data(name, value)
            numeric = (losses[0] - losses[1]) / (2 * eps)
            np.testing.assert_allclose(analytic[name][index], numeric, rtol=1e-6, atol=1e-8,
                                       err_msg=f"d loss / d {name}{list(index)}")


def test_halo_moves_only_neighbouring_tiles():
    """x and y cut along W into 3 blocks, one per rank: each rank receives its
    neighbours' x tiles only (a halo at tile granularity), none from farther away."""
    g = nt.LogicalGraph("halo")
    x = g.tensor([12, 4, 2, 2], "x", "fp64", external=True)
    c = g.tensor([3, 3, 2, 2], "c", "fp64", persistent=True)
    ops.conv2d(x, c, "y", padding=1).mark_output()
    by_width = nt.TileDistribution.block_along_dim(0)
    cg = nt.compile(g, comm=nt.SimulatedWorld(3),
                    tiling=nt.TilingStrategy.manual({"x": [4, 4, 2, 2], "y": [4, 4, 2, 2]}),
                    distribution={"x": by_width, "y": by_width,
                                  "c": nt.TileDistribution.replicated()})
    received = {rank: sorted(ins.key[1][0] for ins in cg.plan.program(rank)
                             if type(ins).__name__ == "Recv" and ins.key[0] == "x")
                for rank in range(3)}
    assert received == {0: [1], 1: [0, 2], 2: [1]}
    rng = np.random.default_rng(2)
    xv, cv = rng.standard_normal((12, 4, 2, 2)), rng.standard_normal((3, 3, 2, 2))
    cg.bind_data("x", xv)
    cg.bind_data("c", cv)
    cg.execute()
    np.testing.assert_allclose(cg.get_output("y"), numpy_conv(xv, cv, (1, 1), (1, 1), (1, 1)),
                               rtol=1e-12, atol=1e-12)
    assert stat_problems(cg) == []


@pytest.mark.parametrize("ranks", [1, 3])
def test_copy_intersection_matches_numpy(ranks):
    """A padded copy of x, its overlap with an offset window, on uneven tiles."""
    g = nt.LogicalGraph("copy")
    src = g.tensor([7, 5], "src", "fp64", external=True)
    dst = g.tensor([6, 8], "dst", "fp64", external=True)
    ops.copy_intersection(src, (2, 0), dst, (0, 3))
    dst.mark_output()
    distribution = "single" if ranks == 1 else \
        {"src": nt.TileDistribution.round_robin(), "dst": nt.TileDistribution.round_robin()}
    cg = nt.compile(g, comm=nt.SimulatedWorld(ranks), distribution=distribution,
                    tiling=nt.TilingStrategy.manual({"src": [3, 2], "dst": [4, 3]}))
    rng = np.random.default_rng(3)
    sv, dv = rng.standard_normal((7, 5)), rng.standard_normal((6, 8))
    cg.bind_data("src", sv)
    cg.bind_data("dst", dv)
    cg.execute()
    expected = dv.copy()
    # global rows: src 2..9, dst 0..6 -> 2..6; columns: src 0..5, dst 3..11 -> 3..5
    expected[2:6, 0:2] = sv[0:4, 3:5]
    np.testing.assert_array_equal(cg.get_output("dst"), expected)
    assert stat_problems(cg) == []


@pytest.mark.parametrize("make, match", [
    (lambda g: ops.conv2d(g.tensor([5, 5, 3, 1], "a", "fp32"),
                          g.tensor([3, 3, 2, 4], "k", "fp32"), "y"), "input channels differ"),
    (lambda g: ops.conv2d(g.tensor([5, 5, 3, 1], "a", "fp32"),
                          g.tensor([3, 3, 3, 4], "k", "fp64"), "y"), "dtypes differ"),
    (lambda g: ops.conv2d(g.tensor([2, 5, 3, 1], "a", "fp32"),
                          g.tensor([3, 3, 3, 4], "k", "fp32"), "y"), "larger than the image"),
    (lambda g: ops.conv2d(g.tensor([5, 5, 3, 1], "a", "fp32"),
                          g.tensor([3, 3, 3, 4], "k", "fp32"), "y", stride=0), "stride"),
    (lambda g: ops.conv2d_bwd_input_inplace(1.0, g.tensor([3, 3, 4, 1], "dy", "fp32"),
                                            g.tensor([3, 3, 3, 4], "k", "fp32"), 0.0,
                                            g.tensor([6, 5, 3, 1], "dx", "fp32")), "geometry"),
    (lambda g: ops.copy_intersection(g.tensor([3, 3], "a", "fp32"), (0, 0),
                                     g.tensor([3], "b", "fp32"), (0,)), "as many dims"),
])
def test_bad_input_names_op_and_tensors(make, match):
    with pytest.raises((ValueError, TypeError), match=match) as error:
        make(nt.LogicalGraph("bad"))
    assert error.value.args[0].split(":")[0] in {"conv2d_inplace", "conv2d_bwd_input_inplace",
                                                 "copy_intersection"}


@pytest.mark.parametrize("ranks", [1, 3])
def test_output_tiles_entirely_in_padding(ranks):
    """Padding 3 with a 3x3 kernel: output rows 0 and 7 read only padding. Their tiles
    (size 1) meet no input tile; the plan still gives them a step (the nearest input
    tile) so beta is applied, and the gradients of every tile still come out right."""
    geometry = ((3, 3), (1, 1), (1, 1))
    g = nt.LogicalGraph("padded")
    x = g.tensor([4, 5, 2, 3], "x", "fp64", external=True, requires_grad=True)
    c = g.tensor([3, 3, 2, 2], "c", "fp64", requires_grad=True, persistent=True)
    y = ops.conv2d(x, c, "y", padding=3).mark_output()
    target = g.tensor(list(y.shape), "target", "fp64", external=True)
    loss = ops.mse_loss(y, target, "loss").mark_output()
    grads = nt.grad(g, loss, [x, c])
    preset = "single" if ranks == 1 else "fsdp"
    cg = nt.compile(g, comm=nt.SimulatedWorld(ranks), distribution=preset,
                    tiling=nt.TilingStrategy.manual({"x": [3, 2, 2, 2], "y": [1, 4, 2, 2]}))
    rng = np.random.default_rng(4)
    xv, cv = rng.standard_normal((4, 5, 2, 3)), rng.standard_normal((3, 3, 2, 2))
    tv = rng.standard_normal(y.shape)
    for name, value in (("x", xv), ("c", cv), ("target", tv)):
        cg.bind_data(name, value)
    cg.execute()
    expected = numpy_conv(xv, cv, *geometry)
    assert not expected[0].any() and not expected[-1].any()
    np.testing.assert_allclose(cg.get_output("y"), expected, rtol=1e-12, atol=1e-12)
    dx, dc = numpy_grads(xv, cv, 2.0 * (expected - tv), *geometry)
    got = {grad.grad_of: cg.get_output(grad.name) for grad in grads}
    np.testing.assert_allclose(got["x"], dx, rtol=1e-11, atol=1e-12)
    np.testing.assert_allclose(got["c"], dc, rtol=1e-11, atol=1e-12)
    assert stat_problems(cg) == []


@pytest.mark.parametrize("ranks", [1, 3])
def test_beta_reaches_output_tiles_in_padding(ranks):
    """conv2d_inplace with beta = 0.5: a tile that reads only padding still becomes
    0.5 * its old value (the plan gives it one step for that)."""
    g = nt.LogicalGraph("padded_beta")
    x = g.tensor([4, 5, 2, 3], "x", "fp64", external=True)
    c = g.tensor([3, 3, 2, 2], "c", "fp64", persistent=True)
    y = g.tensor([8, 9, 2, 3], "y", "fp64", external=True).mark_output()
    ops.conv2d_inplace(2.0, x, c, 0.5, y, padding=3)
    distribution = "single" if ranks == 1 else \
        {name: nt.TileDistribution.round_robin() for name in ("x", "c", "y")}
    cg = nt.compile(g, comm=nt.SimulatedWorld(ranks), distribution=distribution,
                    tiling=nt.TilingStrategy.manual({"x": [3, 2, 2, 2], "y": [1, 4, 2, 2]}))
    rng = np.random.default_rng(5)
    xv, cv, yv = (rng.standard_normal(shape) for shape in ((4, 5, 2, 3), (3, 3, 2, 2),
                                                           (8, 9, 2, 3)))
    for name, value in (("x", xv), ("c", cv), ("y", yv)):
        cg.bind_data(name, value)
    cg.execute()
    expected = 2.0 * numpy_conv(xv, cv, (3, 3), (1, 1), (1, 1)) + 0.5 * yv
    np.testing.assert_allclose(cg.get_output("y"), expected, rtol=1e-12, atol=1e-12)
    assert stat_problems(cg) == []
