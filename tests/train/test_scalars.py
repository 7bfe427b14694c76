"""Runtime scalars: optimizer hyperparameters set between executes without recompiling."""

import json

import numpy as np
import pytest

import nntile_spmd as nt
from nntile_spmd.graph.export import from_json, to_json
from nntile_spmd.train import add_optimizer

SHAPES = {"w": (7, 5), "b": (7,)}
LRS = [0.05, 0.02, 0.0, 0.03]     # a schedule, 0 included (a frozen step)


def optimizer_graph(kind, hyper, prefix=""):
    g = nt.LogicalGraph("opt")
    params, grads = [], []
    for name, shape in SHAPES.items():
        params.append(g.tensor(shape, name, "fp64", requires_grad=True, persistent=True))
        grad = g.tensor(shape, f"{name}_grad", "fp64", persistent=True)
        grad.grad_of = name
        grads.append(grad)
    return g, add_optimizer(g, params, grads, kind, scalar_prefix=prefix, **hyper)


def compile_small(graph, ranks, distribution):
    return nt.compile(graph, comm=nt.SimulatedWorld(ranks), distribution=distribution,
                      tiling=nt.TilingStrategy.manual({"w": [3, 2]}))


def kept_values(cg, info):
    names = list(SHAPES) + info.state_names
    return {name: cg.get_output(name) for name in names}


def inputs(step):
    rng = np.random.default_rng(step)
    return {name: rng.standard_normal(shape) for name, shape in SHAPES.items()}


def start_values():
    rng = np.random.default_rng(99)
    return {name: rng.standard_normal(shape) for name, shape in SHAPES.items()}


def run_step(cg, step):
    for name, value in inputs(step).items():
        cg.bind_data(f"{name}_grad", value)
    cg.execute()


SCHEDULES = [   # kind, fixed hyper, {hyperparameter: value per step}
    ("sgd", {"momentum": 0.9}, {"lr": LRS}),
    ("adam", {}, {"lr": LRS, "beta1": [0.9, 0.8, 0.85, 0.7], "weight_decay": [0, .1, .2, 0]}),
    ("adamw", {}, {"lr": LRS, "beta2": [0.999, 0.99, 0.95, 0.9]}),
]


@pytest.mark.parametrize("ranks,distribution", [(1, "single"), (2, "ddp"), (3, "fsdp")])
@pytest.mark.parametrize("kind,fixed,schedule", SCHEDULES)
def test_set_scalar_schedule_equals_recompiling_each_step(kind, fixed, schedule, ranks,
                                                          distribution):
    graph, info = optimizer_graph(kind, fixed)
    scheduled = compile_small(graph, ranks, distribution)
    for name, value in start_values().items():
        scheduled.bind_data(name, value)
    carried = start_values()
    for step in range(len(LRS)):
        this_step = {key: values[step] for key, values in schedule.items()}
        for key, value in this_step.items():
            scheduled.set_scalar(key, value)
        run_step(scheduled, step)
        # the reference: a graph compiled with this step's values, state carried over
        fresh_graph, fresh_info = optimizer_graph(kind, fixed | this_step)
        fresh = compile_small(fresh_graph, ranks, distribution)
        for name, value in carried.items():
            fresh.bind_data(name, value)
        run_step(fresh, step)
        carried = kept_values(fresh, fresh_info)
    got = kept_values(scheduled, info)
    for name, value in carried.items():
        assert np.array_equal(got[name], value), f"{kind}: {name} differs from recompiling"


def test_a_changed_scalar_changes_the_update():
    """The schedule test's reference is not vacuous: lr really reaches the kernel."""
    graph, _ = optimizer_graph("sgd", {"lr": 0.1})
    cg = compile_small(graph, 2, "ddp")
    for name, value in start_values().items():
        cg.bind_data(name, value)
    cg.set_scalar("lr", 0.0)
    run_step(cg, 0)
    assert np.array_equal(cg.get_output("w"), start_values()["w"])
    cg.set_scalar("lr", 0.5)
    run_step(cg, 1)
    expected = start_values()["w"] - 0.5 * inputs(1)["w"]
    np.testing.assert_allclose(cg.get_output("w"), expected, rtol=1e-14)
    assert cg.get_scalar("lr") == 0.5


def test_scalar_names_defaults_and_errors():
    graph, info = optimizer_graph("adamw", {"lr": 3e-4})
    cg = compile_small(graph, 1, "single")
    assert cg.scalar_names() == ["beta1", "beta2", "eps", "lr", "weight_decay"]
    assert info.scalars["lr"] == "lr" and info.hyper == {"lr": 3e-4}
    assert cg.get_scalar("lr") == 3e-4 and cg.get_scalar("weight_decay") == 1e-2
    with pytest.raises(KeyError, match="no runtime scalar 'learning_rate'.*lr"):
        cg.set_scalar("learning_rate", 0.1)
    for bad in ("0.1", float("nan"), float("inf"), True, None):
        with pytest.raises(TypeError, match="'lr'.*not a finite real"):
            cg.set_scalar("lr", bad)
    cg.set_scalar("lr", np.float32(0.25))
    assert cg.get_scalar("lr") == 0.25 and type(cg.get_scalar("lr")) is float


def test_two_optimizers_are_told_apart_by_prefix():
    g = nt.LogicalGraph("two")
    w = g.tensor([3], "w", "fp64", requires_grad=True, persistent=True)
    v = g.tensor([3], "v", "fp64", requires_grad=True, persistent=True)
    dw, dv = (g.tensor([3], f"d{name}", "fp64", persistent=True) for name in "wv")
    add_optimizer(g, [w], [dw], "sgd", lr=0.1)
    with pytest.raises(ValueError, match="'lr' already has default 0.1.*scalar_prefix"):
        add_optimizer(g, [v], [dv], "sgd", lr=0.2)
    assert len(g.ops()) == 3, "a rejected optimizer must not leave ops behind"
    info = add_optimizer(g, [v], [dv], "sgd", scalar_prefix="head_", lr=0.2)
    assert info.scalars["lr"] == "head_lr"
    cg = nt.compile(g, comm=nt.SimulatedWorld(1))
    for name in ("w", "v"):
        cg.bind_data(name, np.ones(3))
        cg.bind_data(f"d{name}", np.ones(3))
    cg.set_scalar("head_lr", 0.5)
    cg.execute()
    np.testing.assert_allclose(cg.get_output("w"), 0.9)
    np.testing.assert_allclose(cg.get_output("v"), 0.5)


def test_same_names_and_defaults_share_one_scalar():
    g = nt.LogicalGraph("shared")
    tensors = [g.tensor([2], name, "fp64", requires_grad=True, persistent=True)
               for name in ("a", "b", "da", "db")]
    add_optimizer(g, [tensors[0]], [tensors[2]], "sgd", lr=0.1)
    add_optimizer(g, [tensors[1]], [tensors[3]], "sgd", lr=0.1)
    cg = nt.compile(g, comm=nt.SimulatedWorld(1))
    for tensor in tensors:
        cg.bind_data(tensor.name, np.ones(2))
    cg.set_scalar("lr", 0.25)
    cg.execute()
    for name in ("a", "b"):
        np.testing.assert_allclose(cg.get_output(name), 0.75)


def test_scalars_survive_json_export_and_show_in_the_plan():
    graph, _ = optimizer_graph("adam", {"lr": 0.01})
    again = from_json(json.loads(json.dumps(to_json(graph))), nt.LogicalGraph)
    adam = [op for op in again.ops() if op.op_type == "adam_step"][0]
    assert adam.attrs["lr"] == nt.Scalar("lr", 0.01)
    assert repr(adam.attrs["lr"]) == "$lr=0.01"


def test_scalar_rejected_where_the_plan_reads_the_value():
    g = nt.LogicalGraph("bad")
    a = g.tensor([4, 4], "a", "fp32", external=True)
    c = g.tensor([4, 4], "c", "fp32", external=True)
    with pytest.raises(TypeError, match="gemm: beta=\\$b=1.0: the accumulation coefficient"):
        nt.ops.gemm(a, a, c, 1.0, nt.Scalar("b", 1.0))
    with pytest.raises(TypeError, match="gemm: trans_a=.*only float coefficients"):
        nt.ops.gemm(a, a, "d", 1.0, 0.0, nt.Scalar("t", 0.0))
    with pytest.raises(ValueError, match="non-empty str name"):
        nt.Scalar("", 1.0)


def test_user_scalar_in_a_manual_update():
    """`add_inplace(-lr, dw, 1.0, w)` with lr a Scalar: docs/design.md's manual update."""
    g = nt.LogicalGraph("manual")
    w = g.tensor([5], "w", "fp32", persistent=True)
    dw = g.tensor([5], "dw", "fp32", external=True)
    nt.ops.add_inplace(-nt.Scalar("lr", 0.1), dw, 1.0, w)
    cg = nt.compile(g, comm=nt.SimulatedWorld(2), distribution="fsdp",
                    tiling=nt.TilingStrategy.manual({"w": [2]}))
    cg.bind_data("w", np.zeros(5, np.float32))
    cg.bind_data("dw", np.ones(5, np.float32))
    for lr in (0.1, 0.5):
        cg.set_scalar("lr", lr)
        cg.execute()
    np.testing.assert_allclose(cg.get_output("w"), -0.6, rtol=1e-6)
