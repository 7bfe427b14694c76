"""build_mlp: graph layout, init, forward against NumPy, gradients against finite differences."""

import numpy as np
import pytest

import nntile_spmd as nt
from nntile_spmd.models import build_mlp
from nntile_spmd.train import cross_entropy_numpy

SIZES = (5, 7, 6, 3)


def compiled(model, ranks=1, distribution="single"):
    cg = nt.compile(model.graph, comm=nt.SimulatedWorld(ranks), distribution=distribution,
                    tiling=nt.TilingStrategy.auto(target_tile_bytes=64))
    return cg


def bind_all(cg, model, params, x, y):
    for name, value in params.items():
        cg.bind_data(name, value)
    cg.bind_data("x", x)
    cg.bind_data("y", y)


def example(model, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((SIZES[0], model.micro_batch))
    if model.loss_kind == "cross_entropy":
        y = rng.integers(0, SIZES[-1], model.micro_batch).astype(np.int64)
    else:
        y = rng.standard_normal((SIZES[-1], model.micro_batch))
    return model.init_params(rng), x, y


def test_layout_names_and_roles():
    model = build_mlp(SIZES, 8, dtype="fp32")
    g = model.graph
    assert model.inputs == ("x", "y")
    assert g.get_tensor("x").shape == (5, 8) and g.get_tensor("y").dtype == "int64"
    assert model.param_names == ["w1", "b1", "w2", "b2", "w3", "b3"]
    assert g.get_tensor("w2").shape == (6, 7) and g.get_tensor("b2").shape == (6,)
    assert all(g.get_tensor(n).role == "parameter" for n in model.param_names)
    assert [t.name for t in model.grads] == [f"{n}_grad" for n in model.param_names]
    assert model.logits.shape == (3, 8) and model.loss.shape == ()
    ops = {op.op_type for op in g.ops()}
    assert {"gemm", "add_fiber", "gelu", "cross_entropy_loss"} <= ops
    assert model.graph.num_parameters() == 7 * 5 + 7 + 6 * 7 + 6 + 3 * 6 + 3
    loss_op = next(op for op in g.ops() if op.op_type == "cross_entropy_loss")
    assert loss_op.attrs["alpha"] == pytest.approx(1 / 8)


def test_accumulation_splits_the_batch():
    model = build_mlp(SIZES, 12, accumulation=3)
    assert (model.batch, model.micro_batch, model.accumulation) == (12, 4, 3)
    assert model.graph.get_tensor("x").shape == (5, 4)
    loss_op = next(op for op in model.graph.ops() if op.op_type == "cross_entropy_loss")
    assert loss_op.attrs["alpha"] == pytest.approx(1 / 12)


def test_init_params_like_torch_linear():
    model = build_mlp((100, 50, 3), 4, dtype="fp32")
    params = model.init_params(np.random.default_rng(0))
    assert params["w1"].shape == (50, 100) and params["w1"].dtype == np.float32
    bound = 1 / np.sqrt(100)
    assert np.abs(params["w1"]).max() <= bound and np.abs(params["b1"]).max() <= bound
    assert np.abs(params["w1"]).max() > 0.9 * bound            # uniform, not normal
    assert np.abs(params["w2"]).max() <= 1 / np.sqrt(50)
    again = model.init_params(np.random.default_rng(0))
    assert all(np.array_equal(params[k], again[k]) for k in params)


@pytest.mark.parametrize("activation", ["gelu", "relu", "silu", "gelutanh"])
@pytest.mark.parametrize("ranks,distribution", [(1, "single"), (3, "ddp"), (2, "fsdp"),
                                                (3, "tp")])
def test_forward_matches_numpy(activation, ranks, distribution):
    model = build_mlp(SIZES, 10, dtype="fp64", activation=activation, with_grads=False)
    model.logits.mark_output()
    params, x, y = example(model)
    cg = compiled(model, ranks, distribution)
    bind_all(cg, model, params, x, y)
    cg.execute()
    logits = model.reference_forward(params, x)
    np.testing.assert_allclose(cg.get_output("z3"), logits, rtol=1e-12, atol=1e-14)
    assert float(cg.get_output("loss")) == pytest.approx(cross_entropy_numpy(logits, y, 1 / 10),
                                                         rel=1e-12)


@pytest.mark.parametrize("loss", ["cross_entropy", "mse"])
def test_gradients_match_finite_differences(loss):
    model = build_mlp(SIZES, 4, dtype="fp64", loss=loss)
    params, x, y = example(model, seed=1)
    cg = compiled(model, 2, "fsdp")
    bind_all(cg, model, params, x, y)
    cg.execute()
    grads = {g.grad_of: cg.get_output(g.name) for g in model.grads}

    def reference_loss(values):
        logits = model.reference_forward(values, x)
        if loss == "mse":
            return float(np.sum((logits - y) ** 2) / 4)
        return cross_entropy_numpy(logits, y, 1 / 4)

    assert float(cg.get_output("loss")) == pytest.approx(reference_loss(params), rel=1e-12)
    rng, eps = np.random.default_rng(2), 1e-6
    for name, value in params.items():
        for index in [tuple(rng.integers(0, n) for n in value.shape) for _ in range(3)]:
            plus = {k: v.copy() for k, v in params.items()}
            minus = {k: v.copy() for k, v in params.items()}
            plus[name][index] += eps
            minus[name][index] -= eps
            numeric = (reference_loss(plus) - reference_loss(minus)) / (2 * eps)
            assert grads[name][index] == pytest.approx(numeric, rel=1e-5, abs=1e-8), name


def test_forward_model_shares_names():
    model = build_mlp(SIZES, 8)
    forward = model.forward_model(30)
    assert forward.param_names == model.param_names and forward.grads == []
    assert forward.graph.get_tensor("x").shape == (5, 30)
    assert not any(op.phase == "backward" for op in forward.graph.ops())


@pytest.mark.parametrize("kwargs,error,match", [
    ({"layer_sizes": [5]}, ValueError, ">= 2 positive sizes"),
    ({"activation": "tanh"}, ValueError, "unknown activation 'tanh'"),
    ({"dtype": "int64"}, TypeError, "not a float dtype"),
    ({"batch": 10, "accumulation": 3}, ValueError, "multiple of accumulation 3"),
    ({"loss": "hinge"}, ValueError, "unknown loss 'hinge'"),
])
def test_bad_arguments(kwargs, error, match):
    arguments = {"layer_sizes": SIZES, "batch": 6} | kwargs
    with pytest.raises(error, match=match):
        build_mlp(**arguments)
