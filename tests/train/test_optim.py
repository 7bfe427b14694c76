"""add_optimizer: graph structure, state placement, and updates against NumPy and PyTorch."""

import numpy as np
import pytest

import nntile_spmd as nt
from nntile_spmd.train import add_optimizer

SHAPES = {"w": (7, 5), "b": (7,)}
STEPS = 4

CASES = [
    ("sgd", {"lr": 0.1}),
    ("sgd", {"lr": 0.1, "momentum": 0.9, "weight_decay": 0.01}),
    ("sgd", {"lr": 0.05, "momentum": 0.8, "weight_decay": 0.02, "dampening": 0.3}),
    ("sgd", {"lr": 0.05, "momentum": 0.9, "nesterov": True}),
    ("adam", {"lr": 0.01}),
    ("adam", {"lr": 0.02, "beta1": 0.8, "beta2": 0.95, "eps": 1e-6, "weight_decay": 0.1}),
    ("adamw", {"lr": 0.01, "weight_decay": 0.1}),
]
WORLDS = [(1, "single"), (2, "ddp"), (3, "fsdp"), (2, "tp")]


def optimizer_graph(kind, hyper):
    """Parameters with gradients we bind ourselves, so each step's update is exact."""
    g = nt.LogicalGraph("opt")
    params, grads = [], []
    for name, shape in SHAPES.items():
        params.append(g.tensor(shape, name, "fp64", requires_grad=True, persistent=True))
        grad = g.tensor(shape, f"{name}_grad", "fp64", persistent=True)
        grad.grad_of = name       # role "gradient", as nt.grad makes it
        grads.append(grad)
    return g, add_optimizer(g, params, grads, kind, **hyper)


def numpy_reference(kind, hyper, params, grad_steps):
    """PyTorch's documented update rules, written out in NumPy."""
    lr = hyper["lr"]
    wd = hyper.get("weight_decay", 0.0 if kind != "adamw" else 1e-2)
    params = {k: v.copy() for k, v in params.items()}
    state = {k: [np.zeros_like(v), np.zeros_like(v)] for k, v in params.items()}
    for t, grads in enumerate(grad_steps, start=1):
        for name, p in params.items():
            g, (m, v) = grads[name], state[name]
            if kind == "sgd":
                mu, damp = hyper.get("momentum", 0.0), hyper.get("dampening", 0.0)
                g = g + wd * p
                if mu:
                    m[...] = g if t == 1 else mu * m + (1 - damp) * g
                    g = g + mu * m if hyper.get("nesterov") else m
                p -= lr * g
                continue
            b1, b2, eps = hyper.get("beta1", 0.9), hyper.get("beta2", 0.999), hyper.get("eps", 1e-8)
            if kind == "adamw":
                p *= 1 - lr * wd
            else:
                g = g + wd * p
            m[...] = b1 * m + (1 - b1) * g
            v[...] = b2 * v + (1 - b2) * g * g
            p -= lr * (m / (1 - b1**t)) / (np.sqrt(v / (1 - b2**t)) + eps)
    return params


def run_graph(kind, hyper, ranks, distribution, params, grad_steps):
    g, info = optimizer_graph(kind, hyper)
    cg = nt.compile(g, comm=nt.SimulatedWorld(ranks), distribution=distribution,
                    tiling=nt.TilingStrategy.manual({"w": [3, 2]}))
    for name, value in params.items():
        cg.bind_data(name, value)
    for grads in grad_steps:
        for name, value in grads.items():
            cg.bind_data(f"{name}_grad", value)
        cg.execute()
        for name in grads:     # zero_grad ran after the update
            assert not cg.get_output(f"{name}_grad").any(), f"{name}_grad not cleared"
    return cg, info


@pytest.mark.parametrize("ranks,distribution", WORLDS)
@pytest.mark.parametrize("kind,hyper", CASES)
def test_updates_match_numpy_over_steps(kind, hyper, ranks, distribution):
    rng = np.random.default_rng(1)
    params = {k: rng.standard_normal(s) for k, s in SHAPES.items()}
    grad_steps = [{k: rng.standard_normal(s) for k, s in SHAPES.items()} for _ in range(STEPS)]
    cg, info = run_graph(kind, hyper, ranks, distribution, params, grad_steps)
    expected = numpy_reference(kind, hyper, params, grad_steps)
    for name in SHAPES:
        np.testing.assert_allclose(cg.get_output(name), expected[name], rtol=1e-12, atol=1e-14)
    assert int(cg.get_output(info.step)) == STEPS


@pytest.mark.parametrize("kind,hyper", CASES)
def test_updates_match_torch(kind, hyper):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(2)
    params = {k: rng.standard_normal(s) for k, s in SHAPES.items()}
    grad_steps = [{k: rng.standard_normal(s) for k, s in SHAPES.items()} for _ in range(STEPS)]
    cg, _ = run_graph(kind, hyper, 1, "single", params, grad_steps)
    tensors = {k: torch.tensor(v, requires_grad=True) for k, v in params.items()}
    options = {k: v for k, v in hyper.items() if k not in ("beta1", "beta2")}
    if kind != "sgd":
        options["betas"] = (hyper.get("beta1", 0.9), hyper.get("beta2", 0.999))
    if kind == "adamw":
        options.setdefault("weight_decay", 1e-2)
    optimizer = {"sgd": torch.optim.SGD, "adam": torch.optim.Adam,
                 "adamw": torch.optim.AdamW}[kind](list(tensors.values()), **options)
    for grads in grad_steps:
        for name, tensor in tensors.items():
            tensor.grad = torch.tensor(grads[name])
        optimizer.step()
    for name, tensor in tensors.items():
        np.testing.assert_allclose(cg.get_output(name), tensor.detach().numpy(), rtol=1e-12,
                                   atol=1e-14)


def test_graph_structure_and_roles():
    g, info = optimizer_graph("adam", {"lr": 1e-3})
    assert info.state == {"w": ("w_m", "w_v"), "b": ("b_m", "b_v")}
    assert info.state_names == ["optimizer_step", "w_m", "w_v", "b_m", "b_v"]
    step = g.get_tensor(info.step)
    assert (step.shape, step.dtype, step.persistent) == ((), "int64", True)
    for name in info.state_names:
        assert g.get_tensor(name).role == "state"
    optimizer_ops = [op for op in g.ops() if op.phase == "optimizer"]
    assert [op.op_type for op in optimizer_ops] == \
        ["add_scalar", "adam_step", "adam_step", "clear", "clear"]
    assert [op.outputs[0].name for op in optimizer_ops[-2:]] == ["w_grad", "b_grad"]
    _, sgd = optimizer_graph("sgd", {"lr": 0.1})
    assert sgd.state == {"w": ("w_velocity",), "b": ("b_velocity",)}


@pytest.mark.parametrize("ranks", [2, 3, 4])
def test_state_sharded_with_its_parameter_under_fsdp(ranks):
    g, info = optimizer_graph("adamw", {"lr": 1e-3})
    cg = nt.compile(g, comm=nt.SimulatedWorld(ranks), distribution="fsdp",
                    tiling=nt.TilingStrategy.manual({"w": [2, 2]}))
    plan = cg.plan
    for param, state in info.state.items():
        for name in (f"{param}_grad", *state):
            assert plan.tilings[name] == plan.tilings[param], name
            np.testing.assert_array_equal(plan.owners[name], plan.owners[param], err_msg=name)
        assert (plan.owners[param] >= 0).all(), "FSDP parameters must be sharded"
    # the optimizer phase is local: state, gradient and parameter tiles sit together
    assert cg.estimate_communication(phases="optimizer") == 0


def test_bad_arguments():
    g = nt.LogicalGraph("bad")
    w = g.tensor([3], "w", "fp64", requires_grad=True, persistent=True)
    dw = g.tensor([3], "dw", "fp64", persistent=True)
    with pytest.raises(ValueError, match="unknown kind 'lamb'"):
        add_optimizer(g, [w], [dw], "lamb")
    with pytest.raises(TypeError, match="unknown hyperparameter"):
        add_optimizer(g, [w], [dw], "sgd", beta1=0.9)
    with pytest.raises(ValueError, match="2 parameters but 1 gradients"):
        add_optimizer(g, [w, w], [dw], "adam")
    wrong = g.tensor([4], "wrong", "fp64", persistent=True)
    with pytest.raises(ValueError, match="does not match parameter"):
        add_optimizer(g, [w], [wrong], "adam")
