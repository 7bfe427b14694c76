"""The seed elementwise ops and reductions (sub, div, tanh, sigmoid, hypot, mean, max,
min, norm_slice, ...): build-time validation, forward against NumPy and gradients against
central finite differences (fp64), on 1 rank and on 3 simulated ranks with uneven tiles
that split every axis, the reduced ones included."""

import numpy as np
import pytest

import nntile_spmd as nt
from nntile_spmd import ops

RNG = np.random.default_rng(11)
SHAPE = (5, 4, 3)
UNEVEN = {"x": [2, 3, 2], "y": [2, 3, 2]}   # 5 -> 2+2+1, 4 -> 3+1, 3 -> 2+1


def normal(shape):
    return RNG.standard_normal(shape)


def away_from_zero(shape):
    """|values| in [0.5, 2): a divisor, and no kinks of hypot at 0."""
    return RNG.uniform(0.5, 2.0, shape) * RNG.choice([-1.0, 1.0], shape)


def norm_numpy(x, alpha, axis):
    return abs(alpha) * np.sqrt((x * x).sum(axis=axis))


# (case id, {name: value maker} of differentiated inputs, build(graph tensors) -> output,
#  numpy(arrays) -> expected)
CASES = [
    ("sub", {"x": normal, "y": normal}, lambda t: ops.sub(t["x"], t["y"], "out"),
     lambda a: a["x"] - a["y"]),
    ("div", {"x": normal, "y": away_from_zero}, lambda t: ops.div(t["x"], t["y"], "out"),
     lambda a: a["x"] / a["y"]),
    ("tanh", {"x": normal}, lambda t: ops.tanh(t["x"], "out"), lambda a: np.tanh(a["x"])),
    ("sigmoid", {"x": normal}, lambda t: ops.sigmoid(t["x"], "out"),
     lambda a: 1 / (1 + np.exp(-a["x"]))),
    ("hypot", {"x": away_from_zero, "y": away_from_zero},
     lambda t: ops.hypot(0.5, t["x"], -2.0, t["y"], "out"),
     lambda a: np.hypot(0.5 * a["x"], -2.0 * a["y"])),
    ("mean", {"x": normal}, lambda t: ops.mean(t["x"], "out", axes=(0, 2)),
     lambda a: a["x"].mean(axis=(0, 2))),
    ("mean_all", {"x": normal}, lambda t: ops.mean(t["x"], "out", axes=None),
     lambda a: np.array(a["x"].mean())),
    ("min_all", {"x": normal}, lambda t: ops.min(t["x"], "out", axes=None),
     lambda a: np.array(a["x"].min())),
    ("max", {"x": normal}, lambda t: ops.max(t["x"], "out", axes=0),
     lambda a: a["x"].max(axis=0)),
    ("max_two_axes", {"x": normal}, lambda t: ops.max(t["x"], "out", axes=(2, 1)),
     lambda a: a["x"].max(axis=(1, 2))),
    ("min", {"x": normal}, lambda t: ops.min(t["x"], "out", axes=1),
     lambda a: a["x"].min(axis=1)),
    ("norm_slice", {"x": normal}, lambda t: ops.norm_slice(-1.5, t["x"], "out", axis=0),
     lambda a: norm_numpy(a["x"], -1.5, 0)),
    ("norm_slice_axis1", {"x": normal}, lambda t: ops.norm_slice(1.0, t["x"], "out", axis=1),
     lambda a: norm_numpy(a["x"], 1.0, 1)),
    ("norm_fiber", {"x": normal}, lambda t: ops.norm_fiber(1.5, t["x"], "out", axis=1),
     lambda a: 1.5 * np.sqrt((a["x"] ** 2).sum(axis=(0, 2)))),
    ("norm_fiber_batch", {"x": normal},
     lambda t: ops.norm_fiber(-0.5, t["x"], "out", axis=0, batch_ndim=1),
     lambda a: 0.5 * np.sqrt((a["x"] ** 2).sum(axis=1))),
    ("scale_fiber", {"x": normal},
     lambda t: ops.scale_fiber(2.0, ops.sum_fiber(t["x"], "f", axis=1), "out", axis=1,
                               shape=SHAPE),
     lambda a: 2.0 * np.broadcast_to(a["x"].sum(axis=(0, 2))[None, :, None], SHAPE)),
    ("sum", {"x": normal}, lambda t: ops.sum(t["x"], "out", alpha=0.5),
     lambda a: np.array(0.5 * a["x"].sum())),
    # in-place forms, on a copy named "out" (graph/gradients.py)
    ("scale_inplace", {"x": normal}, lambda t: ops.scale_inplace(ops.copy(t["x"], "out"), -1.5),
     lambda a: -1.5 * a["x"]),
    ("add_inplace", {"x": normal, "y": normal},
     lambda t: ops.add_inplace(0.5, t["x"], -2.0, ops.copy(t["y"], "out")),
     lambda a: 0.5 * a["x"] - 2.0 * a["y"]),
    ("add_slice_inplace", {"x": normal, "y": normal},
     lambda t: ops.add_slice_inplace(0.5, ops.sum_slice(t["y"], "s", 1), 2.0,
                                     ops.copy(t["x"], "out"), 1),
     lambda a: 0.5 * a["y"].sum(axis=1, keepdims=True) + 2.0 * a["x"]),
    ("add_fiber_inplace", {"x": normal, "y": normal},
     lambda t: ops.add_fiber_inplace(0.2, ops.sum_fiber(t["y"], "f", axis=0), -0.5,
                                     ops.copy(t["x"], "out"), axis=0),
     lambda a: 0.2 * a["y"].sum(axis=(1, 2))[:, None, None] - 0.5 * a["x"]),
    ("relu_inplace", {"x": away_from_zero},
     lambda t: ops.relu_inplace(ops.copy(t["x"], "out")), lambda a: np.maximum(a["x"], 0)),
    ("sqrt_inplace", {"x": lambda shape: RNG.uniform(0.5, 2.0, shape)},
     lambda t: ops.sqrt_inplace(ops.copy(t["x"], "out")), lambda a: np.sqrt(a["x"])),
    ("tanh_inplace", {"x": normal}, lambda t: ops.tanh_inplace(ops.copy(t["x"], "out")),
     lambda a: np.tanh(a["x"])),
    ("sigmoid_inplace", {"x": normal}, lambda t: ops.sigmoid_inplace(ops.copy(t["x"], "out")),
     lambda a: 1 / (1 + np.exp(-a["x"]))),
    ("hypot_inplace", {"x": away_from_zero, "y": normal},
     lambda t: ops.hypot_inplace(2.0, t["x"], 0.0, ops.copy(t["y"], "out")),
     lambda a: np.abs(2.0 * a["x"])),
    ("norm_slice_inplace", {"x": normal, "y": normal},
     lambda t: ops.norm_slice_inplace(2.0, t["x"], 0.0,
                                      ops.norm_slice(1.0, t["y"], "out", axis=1), axis=1),
     lambda a: norm_numpy(a["x"], 2.0, 1)),
    ("norm_fiber_inplace", {"x": normal, "y": normal},
     lambda t: ops.norm_fiber_inplace(-1.0, t["x"], 0.0,
                                      ops.norm_fiber(1.0, t["y"], "out", axis=2), axis=2),
     lambda a: np.sqrt((a["x"] ** 2).sum(axis=(0, 1)))),
]
IDS = [case[0] for case in CASES]
RANKS = pytest.mark.parametrize("ranks, uneven", [(1, False), (3, True)],
                                ids=["1rank", "3ranks"])


def compiled(inputs, make, ranks, uneven):
    g = nt.LogicalGraph("math")
    tensors = {name: g.tensor(list(SHAPE), name, "fp64", requires_grad=True, persistent=True)
               for name in inputs}
    out = make(tensors).mark_output()
    target = g.tensor(list(out.shape), "target", "fp64", external=True)
    loss = ops.mse_loss(out, target, "loss").mark_output()
    grads = nt.grad(g, loss, [tensors[name] for name in inputs])
    distribution = "single" if ranks == 1 else \
        {tensor.name: nt.TileDistribution.round_robin() for tensor in g.tensors()}
    tiling = nt.TilingStrategy.manual({k: v for k, v in UNEVEN.items() if k in inputs}) \
        if uneven else None
    cg = nt.compile(g, comm=nt.SimulatedWorld(ranks), distribution=distribution,
                    tiling=tiling)
    return cg, out, grads


def bind(cg, inputs, out, target):
    values = {name: make(SHAPE) for name, make in inputs.items()}
    for name, value in values.items():
        cg.bind_data(name, value)
    cg.bind_data("target", target(out.shape))
    cg.execute()
    return values


@RANKS
@pytest.mark.parametrize("case_id, inputs, make, numpy", CASES, ids=IDS)
def test_forward_matches_numpy(case_id, inputs, make, numpy, ranks, uneven):
    cg, out, _ = compiled(inputs, make, ranks, uneven)
    values = bind(cg, inputs, out, np.zeros)
    np.testing.assert_allclose(cg.get_output("out"), numpy(values), rtol=1e-13, atol=1e-13)


@RANKS
@pytest.mark.parametrize("case_id, inputs, make, numpy", CASES, ids=IDS)
def test_gradients_match_finite_differences(case_id, inputs, make, numpy, ranks, uneven):
    cg, out, grads = compiled(inputs, make, ranks, uneven)
    values = bind(cg, inputs, out, normal)
    analytic = {g.grad_of: cg.get_output(g.name) for g in grads}

    def loss_at(name, array):
        cg.bind_data(name, array)
        cg.execute(phases=["forward"])
        return float(cg.get_output("loss"))

    eps = 1e-6
    for name in inputs:
        numeric = np.zeros_like(values[name])
        for index in np.ndindex(values[name].shape):
            plus, minus = values[name].copy(), values[name].copy()
            plus[index] += eps
            minus[index] -= eps
            numeric[index] = (loss_at(name, plus) - loss_at(name, minus)) / (2 * eps)
        loss_at(name, values[name])
        np.testing.assert_allclose(analytic[name], numeric, rtol=1e-6, atol=1e-7,
                                   err_msg=f"{case_id}: d loss / d {name}")


@RANKS
@pytest.mark.parametrize("reduce", ["max", "min"])
def test_ties_share_the_gradient_on_any_tiling(reduce, ranks, uneven):
    """Entries equal to the extremum split its gradient equally, whichever tiles and ranks
    hold them (the counts of the axis's tiles are added before dividing)."""
    cg, out, grads = compiled({"x": None}, lambda t: getattr(ops, reduce)(t["x"], "out", 0),
                              ranks, uneven)
    x = RNG.integers(-1, 2, SHAPE).astype(float)   # many ties along axis 0
    target = normal(out.shape)
    cg.bind_data("x", x)
    cg.bind_data("target", target)
    cg.execute()
    extremum = getattr(x, reduce)(axis=0)
    hit = x == extremum
    dloss = 2 * (extremum - target)
    expected = np.where(hit, dloss / hit.sum(axis=0), 0.0)
    np.testing.assert_allclose(cg.get_output(grads[0].name), expected, rtol=1e-13)


@RANKS
def test_hypot_inplace_and_scalar_inverse_match_numpy(ranks, uneven):
    g = nt.LogicalGraph("inplace")
    x = g.tensor(list(SHAPE), "x", "fp64", external=True)
    y = g.tensor(list(SHAPE), "y", "fp64", external=True)
    z = ops.copy(y, "z")
    ops.hypot_inplace(2.0, x, 0.5, z)
    ops.hypot_scalar_inverse(0.25, -3.0, z)
    nrm = ops.norm_slice(2.0, x, "nrm", axis=2)
    ops.norm_slice_inplace(-1.0, y, 0.5, nrm, axis=2)
    z.mark_output()
    nrm.mark_output()
    distribution = "single" if ranks == 1 else \
        {tensor.name: nt.TileDistribution.round_robin() for tensor in g.tensors()}
    cg = nt.compile(g, comm=nt.SimulatedWorld(ranks), distribution=distribution,
                    tiling=nt.TilingStrategy.manual(UNEVEN) if uneven else None)
    xv, yv = normal(SHAPE), normal(SHAPE)
    cg.bind_data("x", xv)
    cg.bind_data("y", yv)
    cg.execute()
    expected_z = 1 / np.hypot(-3.0 * np.hypot(2.0 * xv, 0.5 * yv), 0.25)
    np.testing.assert_allclose(cg.get_output("z"), expected_z, rtol=1e-13)
    expected_norm = np.hypot(norm_numpy(yv, -1.0, 2), 0.5 * norm_numpy(xv, 2.0, 2))
    np.testing.assert_allclose(cg.get_output("nrm"), expected_norm, rtol=1e-13)


def test_build_time_validation_names_op_and_tensors():
    g = nt.LogicalGraph("bad")
    x = g.tensor([4, 3], "x", "fp64")
    with pytest.raises(ValueError, match=r"sub: shapes differ .*x\[4, 3\]"):
        ops.sub(x, g.tensor([3, 4], "w", "fp64"), "z")
    with pytest.raises(TypeError, match="div: dtypes differ"):
        ops.div(x, g.tensor([4, 3], "f", "fp32"), "z")
    with pytest.raises(TypeError, match="hypot: i must be a floating-point tensor"):
        ops.hypot(1.0, g.tensor([4, 3], "i", "int64"), 1.0, x, "z")
    with pytest.raises(ValueError, match="hypot_scalar_inverse: eps=0 must be a nonzero"):
        ops.hypot_scalar_inverse(0, 1.0, x)
    with pytest.raises(ValueError, match=r"max: axes=\(0, 0\) must be distinct axes"):
        ops.max(x, "m", axes=(0, 0))
    with pytest.raises(ValueError, match=r"mean: axes=\(2,\) must be distinct axes in \[0, 2\)"):
        ops.mean(x, "m", axes=2)
    with pytest.raises(ValueError, match="norm_slice: axis=3 out of range"):
        ops.norm_slice(1.0, x, "n", axis=3)
    with pytest.raises(ValueError, match=r"norm_slice_inplace: output s must be \[3\]"):
        ops.norm_slice_inplace(1.0, x, 1.0, g.tensor([4], "s", "fp64"), axis=0)
    with pytest.raises(TypeError, match="scale_fiber: a new output 'y' needs shape="):
        ops.scale_fiber(1.0, g.tensor([3], "f3", "fp64"), "y", axis=1)
    with pytest.raises(ValueError, match=r"scale_fiber: f4 must have shape \[3\]"):
        ops.scale_fiber(1.0, g.tensor([4], "f4", "fp64"), "y", axis=1, shape=(4, 3))
    with pytest.raises(ValueError, match=r"norm_fiber_backward: d must have shape \[3\]"):
        ops.norm_fiber_backward(x, g.tensor([3], "n3", "fp64"), g.tensor([4], "d", "fp64"),
                                x, axis=1)
    with pytest.raises(ValueError, match="sum_backward: v must be 0-d"):
        ops.sum_backward(g.tensor([1], "v", "fp64"), x)
    assert not any(g.has_tensor(name) for name in ("z", "m", "n", "y"))


@pytest.mark.parametrize("make, match", [
    (lambda x, y: ops.hypot_inplace(1.0, x, 1.0, ops.copy(y, "c")), "overwrites c"),
    (lambda x, y: ops.scale_inplace(x, 2.0), "overwrites x, a tensor whose gradient"),
    (lambda x, y: ops.gelu_inplace(ops.copy(x, "c")), "has no backward rule"),
])
def test_inplace_rules_refuse_lost_values(make, match):
    g = nt.LogicalGraph("refuse")
    x, y = (g.tensor([4, 3], name, "fp64", requires_grad=True) for name in ("x", "y"))
    out = make(x, y)
    loss = ops.mse_loss(out, g.tensor([4, 3], "target", "fp64"), "loss")
    with pytest.raises(NotImplementedError, match=match):
        nt.grad(g, loss, [x, y])


def test_accumulating_max_refuses_gradient():
    g = nt.LogicalGraph("acc")
    x = g.tensor([4, 3], "x", "fp64", requires_grad=True)
    m = g.tensor([3], "m", "fp64", requires_grad=True)
    ops.apply("max", [x], [m], axis=0, beta=1.0)
    loss = ops.mse_loss(m, g.tensor([3], "target", "fp64"), "loss")
    with pytest.raises(NotImplementedError, match="accumulates into m"):
        nt.grad(g, loss, [x, m])
