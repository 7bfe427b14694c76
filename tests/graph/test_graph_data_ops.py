"""The data-movement ops (slice, slice_backward, concat, reshape, gather, scatter) and
batch_norm: forward against NumPy on 1 and 3 simulated ranks under every preset, with
uneven tilings whose input and output tiles do not line up; gradients against central
finite differences (fp64) on 1 and 3 ranks, and the same gradients under every preset."""

import numpy as np
import pytest

import nntile_spmd as nt
from nntile_spmd import ops

RNG = np.random.default_rng(5)
PRESETS = ["single", "ddp", "fsdp", "tp"]


def normal(shape):
    return RNG.standard_normal(shape)


# (case id, {input name: shape}, build(tensors) -> output named "out", numpy(arrays),
#  {tensor name: tile boundaries or sizes}: the uneven tiling on 3 ranks)
CASES = [
    ("slice", {"x": (7, 4)}, lambda t: ops.slice(t["x"], "out", 0, 2, 6),
     lambda a: a["x"][2:6], {"x": [3, 3], "out": [[0, 1, 4], None]}),
    ("slice_axis1", {"x": (3, 7, 2)}, lambda t: ops.slice(t["x"], "out", 1, 1, 7),
     lambda a: a["x"][:, 1:7], {"x": [2, [0, 2, 5, 7], 1], "out": [None, [0, 4, 6], None]}),
    ("concat", {"x": (4, 3), "y": (3, 3)},
     lambda t: ops.concat([t["x"], t["y"]], "out", axis=0),
     lambda a: np.concatenate([a["x"], a["y"]]),
     {"x": [3, 2], "y": [2, 2], "out": [[0, 2, 7], None]}),
    ("concat_three_axis1", {"x": (2, 2), "y": (2, 3), "z": (2, 1)},
     lambda t: ops.concat([t["x"], t["y"], t["z"]], "out", axis=1),
     lambda a: np.concatenate([a["x"], a["y"], a["z"]], axis=1),
     {"y": [1, [0, 1, 3]], "out": [None, [0, 3, 6]]}),
    ("reshape", {"x": (6, 4)}, lambda t: ops.reshape(t["x"], "out", [3, 8]),
     lambda a: a["x"].reshape(3, 8, order="F"), {"x": [4, 3], "out": [2, [0, 3, 8]]}),
    ("reshape_3d", {"x": (4, 3, 2)}, lambda t: ops.reshape(t["x"], "out", [12, 2]),
     lambda a: a["x"].reshape(12, 2, order="F"), {"x": [3, 2, 1], "out": [5, 1]}),
    ("gather", {"x": (5, 4)}, lambda t: ops.gather(t["x"], "out"), lambda a: a["x"],
     {"x": [2, 3]}),
    ("scatter", {"x": (5, 4)}, lambda t: ops.scatter(t["x"], "out"), lambda a: a["x"],
     {"out": [2, 3]}),
    ("slice_backward_pad", {"x": (3, 4)},
     lambda t: ops.slice_backward(t["x"], t["x"].graph.tensor([3, 9], "out", "fp64"), 1, 2,
                                  beta=0.0),
     lambda a: np.pad(a["x"], ((0, 0), (2, 3))), {"x": [2, 3], "out": [None, [0, 1, 4, 9]]}),
    ("batch_norm", {"x": (3, 5, 2), "gamma": (3,), "beta": (3,)},
     lambda t: ops.batch_norm(t["x"], t["gamma"], t["beta"], "out", axis=0, eps=1e-3),
     lambda a: batch_norm_numpy(a["x"], a["gamma"], a["beta"], 0, 1e-3),
     {"x": [2, 2, 1]}),
    ("batch_norm_axis1", {"x": (4, 3, 3)},
     lambda t: ops.batch_norm(t["x"], t["x"].graph.tensor([3], "g", "fp64", persistent=True),
                              t["x"].graph.tensor([3], "b", "fp64", persistent=True), "out",
                              axis=1),
     lambda a: batch_norm_numpy(a["x"], np.zeros(3), np.zeros(3), 1, 1e-5), {"x": [3, 2, 2]}),
]
IDS = [case[0] for case in CASES]


def batch_norm_numpy(x, gamma, beta, axis, eps):
    others = tuple(d for d in range(x.ndim) if d != axis)
    mean = x.mean(axis=others, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=others, keepdims=True)
    shape = [1] * x.ndim
    shape[axis] = -1
    return (x - mean) / np.sqrt(var + eps) * gamma.reshape(shape) + beta.reshape(shape)


def build(inputs, make, with_grad):
    g = nt.LogicalGraph("data")
    tensors = {name: g.tensor(list(shape), name, "fp64", requires_grad=with_grad,
                              persistent=True) for name, shape in inputs.items()}
    out = make(tensors).mark_output()
    target = g.tensor(list(out.shape), "target", "fp64", external=True)
    loss = ops.mse_loss(out, target, "loss").mark_output()
    grads = nt.grad(g, loss, list(tensors.values())) if with_grad else []
    return g, out, grads


def compile_case(g, ranks, distribution, uneven):
    tiling = nt.TilingStrategy.explicit(uneven) if ranks > 1 else None
    return nt.compile(g, comm=nt.SimulatedWorld(ranks), distribution=distribution,
                      tiling=tiling)


def run(cg, inputs, out, extra=()):
    values = {name: normal(shape) for name, shape in inputs.items()}
    for name, value in values.items():
        cg.bind_data(name, value)
    for name, shape in extra:
        values[name] = np.zeros(shape)
        cg.bind_data(name, values[name])
    values["target"] = normal(out.shape)
    cg.bind_data("target", values["target"])
    cg.execute()
    return values


def persistent_extras(g, inputs):
    """Persistent tensors a case creates itself (batch_norm_axis1's gamma and beta)."""
    return [(t.name, t.shape) for t in g.tensors()
            if t.persistent and t.role != "gradient" and t.name not in inputs
            and t.grad_of is None and t.name != "target"]


@pytest.mark.parametrize("ranks", [1, 3])
@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("case_id, inputs, make, numpy, uneven", CASES, ids=IDS)
def test_forward_matches_numpy(case_id, inputs, make, numpy, uneven, preset, ranks):
    g, out, _ = build(inputs, make, with_grad=False)
    cg = compile_case(g, ranks, preset, uneven)
    values = run(cg, inputs, out, persistent_extras(g, inputs))
    np.testing.assert_allclose(cg.get_output("out"), numpy(values), rtol=1e-12, atol=1e-12)


def finite_difference(cg, values, name, eps=1e-6):
    def loss_at(array):
        cg.bind_data(name, array)
        cg.execute(phases=["forward"])
        return float(cg.get_output("loss"))

    numeric = np.zeros_like(values[name])
    for index in np.ndindex(values[name].shape):
        plus, minus = values[name].copy(), values[name].copy()
        plus[index] += eps
        minus[index] -= eps
        numeric[index] = (loss_at(plus) - loss_at(minus)) / (2 * eps)
    loss_at(values[name])
    return numeric


@pytest.mark.parametrize("ranks, distribution", [(1, "single"), (3, "round_robin")],
                         ids=["1rank", "3ranks"])
@pytest.mark.parametrize("case_id, inputs, make, numpy, uneven", CASES, ids=IDS)
def test_gradients_match_finite_differences(case_id, inputs, make, numpy, uneven, ranks,
                                            distribution):
    g, out, grads = build(inputs, make, with_grad=True)
    if distribution == "round_robin":
        distribution = {t.name: nt.TileDistribution.round_robin() for t in g.tensors()}
    cg = compile_case(g, ranks, distribution, uneven)
    values = run(cg, inputs, out, persistent_extras(g, inputs))
    analytic = {grad.grad_of: cg.get_output(grad.name) for grad in grads}
    for name in inputs:
        np.testing.assert_allclose(analytic[name], finite_difference(cg, values, name),
                                   rtol=1e-6, atol=1e-7, err_msg=f"{case_id}: d loss / d {name}")


@pytest.mark.parametrize("preset", ["ddp", "fsdp", "tp"])
@pytest.mark.parametrize("case_id, inputs, make, numpy, uneven", CASES, ids=IDS)
def test_gradients_agree_under_every_preset(case_id, inputs, make, numpy, uneven, preset):
    """3 ranks under each preset give the 1-rank gradients (checked against FD above)."""
    results = []
    for ranks, distribution in ((1, "single"), (3, preset)):
        g, out, grads = build(inputs, make, with_grad=True)
        cg = compile_case(g, ranks, distribution, uneven)
        RNG.bit_generator.state = np.random.default_rng(99).bit_generator.state
        run(cg, inputs, out, persistent_extras(g, inputs))
        results.append({grad.grad_of: cg.get_output(grad.name) for grad in grads})
    for name in inputs:
        np.testing.assert_allclose(results[1][name], results[0][name], rtol=1e-12,
                                   atol=1e-12, err_msg=f"{case_id} under {preset}: d/d{name}")
