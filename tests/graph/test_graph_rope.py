"""rope, scale_slice and rms_norm: build-time validation, forward against NumPy and
gradients against central finite differences (fp64), on 1 rank and on 3 simulated
ranks with uneven tiles that split every axis the op lets split (rope keeps dim 0
whole; scale_slice and rms_norm split their broadcast and normalized axes)."""

import numpy as np
import pytest

import nntile_spmd as nt
from nntile_spmd import ops

RNG = np.random.default_rng(5)
HALF, T, B, H = 3, 5, 2, 3


def rope_numpy(sin, cos, src):
    """transformers' rotate_half applied to src with its dim 0 deinterleaved: NNTile's
    pairs (2i, 2i+1) are transformers' (i, i + head_dim/2)."""
    half = sin.shape[0]
    order = np.arange(2 * half).reshape(half, 2).T.reshape(-1)   # evens, then odds
    x = src[order]
    extra = (None,) * (src.ndim - sin.ndim)
    c = np.concatenate([cos, cos])[(..., *extra)]
    s = np.concatenate([sin, sin])[(..., *extra)]
    rotated = np.concatenate([-x[half:], x[:half]])
    out = x * c + rotated * s
    return out[np.argsort(order)]


def tables():
    angle = RNG.uniform(-3, 3, (HALF, T, B))
    return np.sin(angle), np.cos(angle)


def rms_norm_numpy(x, gamma, axis, eps):
    meansq = (x * x).mean(axis=axis, keepdims=True)
    shape = [1] * x.ndim
    shape[axis] = -1
    return x / np.sqrt(meansq + eps) * gamma.reshape(shape)


# (case id, {name: shape} of differentiated inputs, build(graph tensors) -> output,
#  numpy(arrays) -> expected, uneven tiles)
CASES = [
    ("rope", {"x": (2 * HALF, T, B, H)},
     lambda t: ops.rope(t["sin"], t["cos"], t["x"], "out"),
     lambda a: rope_numpy(a["sin"], a["cos"], a["x"]), {"x": [2 * HALF, 2, 1, 2]}),
    ("rope_no_broadcast", {"x": (2 * HALF, T, B)},
     lambda t: ops.rope(t["sin"], t["cos"], t["x"], "out"),
     lambda a: rope_numpy(a["sin"], a["cos"], a["x"]), {"x": [2 * HALF, 3, 1]}),
    ("scale_slice", {"x": (4, T, 3)},
     lambda t: ops.scale_slice(0.5, t["x"], "out", axis=2, size=3),
     lambda a: 0.5 * np.repeat(a["x"][:, :, None], 3, axis=2), {"out": [3, 2, 2, 2]}),
    ("rms_norm", {"x": (7, T, B), "gamma": (7,)},
     lambda t: ops.rms_norm(t["x"], t["gamma"], "out", eps=0.1),
     lambda a: rms_norm_numpy(a["x"], a["gamma"], 0, 0.1), {"x": [3, 2, 1]}),
    ("rms_norm_axis1", {"x": (4, 7, B), "gamma": (7,)},
     lambda t: ops.rms_norm(t["x"], t["gamma"], "out", axis=1, eps=1e-6),
     lambda a: rms_norm_numpy(a["x"], a["gamma"], 1, 1e-6), {"x": [2, 3, 1]}),
]
IDS = [case[0] for case in CASES]


def build(inputs, make):
    g = nt.LogicalGraph("rope")
    tensors = {name: g.tensor([HALF, T, B], name, "fp64", external=True, persistent=True)
               for name in ("sin", "cos")}
    tensors |= {name: g.tensor(list(shape), name, "fp64", requires_grad=True,
                               persistent=True) for name, shape in inputs.items()}
    out = make(tensors).mark_output()
    target = g.tensor(list(out.shape), "target", "fp64", external=True)
    loss = ops.mse_loss(out, target, "loss").mark_output()
    grads = nt.grad(g, loss, [tensors[name] for name in inputs])
    return g, out, grads


def values_for(inputs, out_shape=None):
    sin, cos = tables()
    values = {name: RNG.standard_normal(shape) for name, shape in inputs.items()}
    return values | {"sin": sin, "cos": cos}


def compiled(inputs, make, ranks, tiles):
    g, out, grads = build(inputs, make)
    distribution = "single" if ranks == 1 else \
        {tensor.name: nt.TileDistribution.round_robin() for tensor in g.tensors()}
    tiling = nt.TilingStrategy.manual(tiles) if tiles else None
    cg = nt.compile(g, comm=nt.SimulatedWorld(ranks), distribution=distribution,
                    tiling=tiling)
    return cg, out, grads


@pytest.mark.parametrize("ranks, uneven", [(1, False), (3, True)], ids=["1rank", "3ranks"])
@pytest.mark.parametrize("case_id, inputs, make, numpy, tiles", CASES, ids=IDS)
def test_forward_matches_numpy(case_id, inputs, make, numpy, tiles, ranks, uneven):
    cg, out, _ = compiled(inputs, make, ranks, tiles if uneven else None)
    values = values_for(inputs)
    values["target"] = np.zeros(out.shape)
    for name, value in values.items():
        cg.bind_data(name, value)
    cg.execute()
    np.testing.assert_allclose(cg.get_output("out"), numpy(values), rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("ranks, uneven", [(1, False), (3, True)], ids=["1rank", "3ranks"])
@pytest.mark.parametrize("case_id, inputs, make, numpy, tiles", CASES, ids=IDS)
def test_gradients_match_finite_differences(case_id, inputs, make, numpy, tiles, ranks,
                                            uneven):
    cg, out, grads = compiled(inputs, make, ranks, tiles if uneven else None)
    values = values_for(inputs)
    values["target"] = RNG.standard_normal(out.shape)
    for name, value in values.items():
        cg.bind_data(name, value)
    cg.execute()
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


def test_rope_rejects_mismatched_operands():
    g = nt.LogicalGraph("bad")
    sin = g.tensor([3, 5], "sin", "fp64")
    cos = g.tensor([3, 5], "cos", "fp64")
    with pytest.raises(ValueError, match=r"rope: x dim 0 must be twice .*sin\[3, 5\]"):
        ops.rope(sin, cos, g.tensor([5, 5, 2], "x", "fp64"), "y")
    with pytest.raises(ValueError, match="rope: z dims 1..1 must equal"):
        ops.rope(sin, cos, g.tensor([6, 4], "z", "fp64"), "y")
    with pytest.raises(TypeError, match="rope: dtypes differ"):
        ops.rope(sin, cos, g.tensor([6, 5], "w", "fp32"), "y")
    with pytest.raises(ValueError, match="rope: sin and c2 must have the same shape"):
        ops.rope(sin, g.tensor([3, 4], "c2", "fp64"), g.tensor([6, 5], "v", "fp64"), "y")
    assert not g.has_tensor("y")


def test_rope_keeps_the_pair_axis_whole():
    g = nt.LogicalGraph("whole")
    sin = g.tensor([3, 5], "sin", "fp64", external=True)
    cos = g.tensor([3, 5], "cos", "fp64", external=True)
    ops.rope(sin, cos, g.tensor([6, 5], "x", "fp64", external=True), "y").mark_output()
    with pytest.raises(ValueError, match="must stay whole"):
        nt.compile(g, comm=nt.SimulatedWorld(1), tiling=nt.TilingStrategy.manual({"x": [2, 5]}))


def test_scale_slice_and_rms_norm_validate():
    g = nt.LogicalGraph("bad")
    x = g.tensor([4, 3], "x", "fp64")
    with pytest.raises(TypeError, match="scale_slice: a new output 'y' needs size="):
        ops.scale_slice(1.0, x, "y", axis=1)
    with pytest.raises(ValueError, match="scale_slice: size=0"):
        ops.scale_slice(1.0, x, "y", axis=1, size=0)
    with pytest.raises(ValueError, match="scale_slice: output d must be"):
        ops.scale_slice(1.0, x, g.tensor([4, 2, 3], "d", "fp64"), axis=1, size=3)
    assert ops.scale_slice(1.0, x, g.tensor([4, 2, 3], "e", "fp64"), axis=1).shape == (4, 2, 3)
    with pytest.raises(ValueError, match=r"rms_norm: g must have shape \[4\]"):
        ops.rms_norm(x, g.tensor([3], "g", "fp64"), "n")
    with pytest.raises(TypeError, match="rms_norm: h must have x's dtype"):
        ops.rms_norm(x, g.tensor([4], "h", "fp32"), "n")
    assert not g.has_tensor("n") and not g.has_tensor("n_meansq")
