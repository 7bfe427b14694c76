"""layer_norm, a composite of slice and fiber ops, against torch.nn.functional.layer_norm
and NumPy (forward), and against torch autograd and finite differences (backward),
with the normalized axis C of x [C, T, B] cut into uneven tiles on 1 and 3 simulated
ranks under several distributions (TP puts C's tiles on different ranks)."""

import numpy as np
import pytest
from helpers import layer_norm as numpy_layer_norm

import nntile_spmd as nt
from nntile_spmd import ops
from nntile_spmd.graph.norms import LAYER_NORM_PARTS

SHAPE = (7, 3, 2)                      # [C, T, B]
TILES = {"x": [3, 2, 1]}               # C in tiles 3, 3, 1; T in 2, 1; B in 1, 1
EPS = 1e-5
DISTRIBUTIONS = [(1, "single"), (3, "fsdp"), (3, "tp"), (3, "round_robin")]


def arrays(seed=0, axis=0):
    rng = np.random.default_rng(seed)
    size = SHAPE[axis]
    # an offset mean and a spread variance, so centering and scaling both matter
    return {"x": 3.0 + 2.0 * rng.standard_normal(SHAPE), "gamma": rng.standard_normal(size),
            "beta": rng.standard_normal(size), "target": rng.standard_normal(SHAPE)}


def build(axis=0, eps=EPS):
    """x -> layer_norm -> y; loss = sum((y - target)^2); gradients of x, gamma, beta."""
    g = nt.LogicalGraph("layer_norm")
    x = g.tensor(list(SHAPE), "x", "fp64", external=True)
    target = g.tensor(list(SHAPE), "target", "fp64", external=True)
    gamma = g.tensor([SHAPE[axis]], "gamma", "fp64", requires_grad=True, persistent=True)
    beta = g.tensor([SHAPE[axis]], "beta", "fp64", requires_grad=True, persistent=True)
    y = ops.layer_norm(x, gamma, beta, "y", axis=axis, eps=eps)
    y.mark_output()
    loss = ops.mse_loss(y, target, "loss")
    loss.mark_output()
    grads = nt.grad(g, loss, [x, gamma, beta])
    return g, {tensor.name: grad.name for tensor, grad in zip((x, gamma, beta), grads)}


def compiled(graph, nranks, distribution, tiles=TILES):
    if distribution == "round_robin":   # every tensor's tiles dealt over the ranks in turn
        distribution = {t.name: nt.TileDistribution.round_robin() for t in graph.tensors()}
    return nt.compile(graph, comm=nt.SimulatedWorld(nranks), distribution=distribution,
                      tiling=nt.TilingStrategy.manual(tiles))


def run(cg, values, phases=None):
    for name, array in values.items():
        cg.bind_data(name, array)
    cg.execute(phases=phases)


def torch_layer_norm(values, axis, eps=EPS):
    """(y, loss gradients of x, gamma, beta) by torch in fp64, C moved last for torch."""
    torch = pytest.importorskip("torch")
    x = torch.tensor(np.moveaxis(values["x"], axis, -1), requires_grad=True)
    gamma = torch.tensor(values["gamma"], requires_grad=True)
    beta = torch.tensor(values["beta"], requires_grad=True)
    y = torch.nn.functional.layer_norm(x, (x.shape[-1],), gamma, beta, eps)
    target = torch.tensor(np.moveaxis(values["target"], axis, -1))
    ((y - target) ** 2).sum().backward()
    back = lambda tensor: np.moveaxis(tensor.detach().numpy(), -1, axis)  # noqa: E731
    return back(y), {"x": back(x.grad), "gamma": gamma.grad.numpy(), "beta": beta.grad.numpy()}


@pytest.mark.parametrize("nranks, distribution", DISTRIBUTIONS)
@pytest.mark.parametrize("axis", [0, 1])
def test_forward_matches_numpy(axis, nranks, distribution):
    values = arrays(1, axis)
    graph, _ = build(axis)
    cg = compiled(graph, nranks, distribution)
    run(cg, values, phases=["forward"])
    expected = numpy_layer_norm(values["x"], values["gamma"], values["beta"], axis, EPS)
    np.testing.assert_allclose(cg.get_output("y"), expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("nranks, distribution", DISTRIBUTIONS)
@pytest.mark.parametrize("axis", [0, 2])
def test_forward_and_gradients_match_torch(axis, nranks, distribution):
    values = arrays(2, axis)
    expected_y, expected_grads = torch_layer_norm(values, axis)
    graph, grad_names = build(axis)
    cg = compiled(graph, nranks, distribution)
    run(cg, values)
    np.testing.assert_allclose(cg.get_output("y"), expected_y, rtol=1e-12, atol=1e-12)
    for name, grad_name in grad_names.items():
        np.testing.assert_allclose(cg.get_output(grad_name), expected_grads[name], rtol=1e-9,
                                   atol=1e-10, err_msg=f"d loss / d {name}")


@pytest.mark.parametrize("nranks, distribution", DISTRIBUTIONS)
def test_gradients_match_finite_differences(nranks, distribution):
    """Central differences of the loss, perturbing every element of x, gamma and beta."""
    values = arrays(3)
    graph, grad_names = build()
    cg = compiled(graph, nranks, distribution)
    run(cg, values)
    analytic = {name: cg.get_output(grad) for name, grad in grad_names.items()}

    def loss_at(name, array):
        run(cg, {name: array}, phases=["forward"])
        return float(cg.get_output("loss"))

    h = 1e-6
    for name in grad_names:
        numeric = np.zeros_like(values[name])
        for index in np.ndindex(values[name].shape):
            plus, minus = values[name].copy(), values[name].copy()
            plus[index] += h
            minus[index] -= h
            numeric[index] = (loss_at(name, plus) - loss_at(name, minus)) / (2 * h)
        loss_at(name, values[name])
        np.testing.assert_allclose(analytic[name], numeric, rtol=1e-6, atol=1e-6,
                                   err_msg=f"d loss / d {name} ({distribution})")


@pytest.mark.parametrize("distribution", ["tp", "round_robin"])
def test_the_normalized_axis_is_split_over_ranks(distribution):
    """What the tests above claim: x's C tiles are owned by more than one rank."""
    graph, _ = build()
    cg = compiled(graph, 3, distribution)
    owners = {cg.plan.owner_of(("x", (i, 0, 0))) for i in range(3)}
    assert len(owners) > 1, owners


def test_intermediates_are_named_after_the_output():
    graph, _ = build()
    names = {t.name for t in graph.tensors()}
    assert {f"y_{part}" for part in LAYER_NORM_PARTS} <= names


def operands(dtype="fp64", gamma_shape=(7,), symbol=False):
    g = nt.LogicalGraph("mistakes")
    x = g.tensor(["C" if symbol else 7, 3], "x", "fp64")
    gamma = g.tensor(list(gamma_shape), "gamma", dtype)
    beta = g.tensor([7], "beta", "fp64")
    return g, x, gamma, beta


ERROR_CASES = [
    ("axis", lambda: ops.layer_norm(*operands()[1:], "y", axis=2), ValueError,
     ["layer_norm:", "axis=2 out of range for 2 dims", "x[7, 3]:fp64"]),
    ("gamma_shape", lambda: ops.layer_norm(*operands(gamma_shape=(3,))[1:], "y"), ValueError,
     ["layer_norm:", "gamma must have shape [7]", "gamma[3]"]),
    ("gamma_dtype", lambda: ops.layer_norm(*operands(dtype="fp32")[1:], "y"), TypeError,
     ["layer_norm:", "gamma must have x's dtype", "gamma[7]:fp32"]),
    ("eps", lambda: ops.layer_norm(*operands()[1:], "y", eps=-1.0), ValueError,
     ["layer_norm:", "eps=-1.0"]),
    ("symbol", lambda: ops.layer_norm(*operands(symbol=True)[1:], "y"), ValueError,
     ["layer_norm:", "concrete size", "'C'"]),
    ("taken", lambda: ops.layer_norm(*operands()[1:], "x"), ValueError,
     ["layer_norm:", "tensor name 'x' is already in use"]),
]


@pytest.mark.parametrize("case_id, mistake, error, fragments", ERROR_CASES,
                         ids=[case[0] for case in ERROR_CASES])
def test_mistake_raises_before_any_op_is_added(case_id, mistake, error, fragments):
    with pytest.raises(error) as caught:
        mistake()
    for fragment in fragments:
        assert fragment in str(caught.value), f"{case_id}: {fragment!r} not in {caught.value}"


def test_a_failed_layer_norm_leaves_the_graph_unchanged():
    g, x, gamma, beta = operands()
    g.tensor([3], "y_rstd", "fp64")            # one intermediate's name is taken
    with pytest.raises(ValueError, match="'y_rstd' is already in use"):
        ops.layer_norm(x, gamma, beta, "y")
    assert g.num_operations() == 0 and not g.has_tensor("y_mean")
