"""Persistent tensors shared between compiled graphs (runtime/sharing.py): the seed's
training loop of three graphs (§10.4.3: forward + loss, backward, optimizer) over the
same parameters and gradients, with no copy through NumPy, equals the same steps run
by one graph; planned differently, or not persistent, a tensor is refused by name.
Plain pytest (SimulatedWorld)."""

import math
import threading

import numpy as np
import pytest

import nntile_spmd as nt
from nntile_spmd.graph import ExecutableGraph, LogicalGraph, PhysicalGraph, TensorSpec
from nntile_spmd.train import add_optimizer

pytestmark = pytest.mark.mpi_skip
# uneven tiles: w1 [6, 5] as 2+4 by 3+2, w2 [3, 6] as 1+2 by 2+4, x [5, 7] by 4+3
TILES = {"x": [[0, 3, 5], [0, 4, 7]], "w1": [[0, 2, 6], [0, 3, 5]],
         "w2": [[0, 1, 3], [0, 2, 6]]}
PARAMS = ("w1", "w2")
GRADS = ("w1_grad", "w2_grad")
LR, STEPS = 0.05, 3


def model(name):
    """loss = sum((w2 gelu(w1 x) - t)^2), x [5, 7], t [3, 7]; parameters and loss."""
    g = nt.LogicalGraph(name)
    x = g.tensor([5, 7], "x", "fp64", external=True)
    t = g.tensor([3, 7], "t", "fp64", external=True)
    w1 = g.tensor([6, 5], "w1", "fp64", persistent=True, requires_grad=True)
    w2 = g.tensor([3, 6], "w2", "fp64", persistent=True, requires_grad=True)
    h = nt.ops.gelu(nt.ops.gemm(w1, x, "h1"), "h")
    loss = nt.ops.mse_loss(nt.ops.gemm(w2, h, "y"), t, "loss")
    loss.mark_output()
    return g, [w1, w2], loss


def three_graphs():
    """The seed's forward + loss, backward (recomputing the forward) and optimizer."""
    forward, _, _ = model("forward")
    backward, params, loss = model("backward")
    nt.grad(backward, loss, params)
    optimizer = nt.LogicalGraph("optimizer")
    params = [optimizer.tensor(shape, name, "fp64", persistent=True)
              for name, shape in (("w1", [6, 5]), ("w2", [3, 6]))]
    grads = [optimizer.tensor(p.shape, f"{p.name}_grad", "fp64", persistent=True)
             for p in params]
    add_optimizer(optimizer, params, grads, "sgd", lr=LR)
    return forward, backward, optimizer


def one_graph():
    g, params, loss = model("whole")
    grads = nt.grad(g, loss, params)
    add_optimizer(g, params, grads, "sgd", lr=LR)
    return g


def data(step):
    rng = np.random.default_rng(step)
    return rng.standard_normal((5, 7)), rng.standard_normal((3, 7))


def start_values():
    rng = np.random.default_rng(100)
    return {"w1": rng.standard_normal((6, 5)) * 0.5, "w2": rng.standard_normal((3, 6)) * 0.5}


def compile_on(graph, world, preset):
    tiles = {name: tile for name, tile in TILES.items() if graph.has_tensor(name)}
    return nt.compile(graph, comm=world, distribution=preset,
                      tiling=nt.TilingStrategy.explicit(tiles, target_tile_bytes=64))


@pytest.mark.parametrize("ranks, preset", [(1, "single"), (3, "fsdp"), (3, "ddp")])
def test_three_graphs_sharing_train_as_one_graph(ranks, preset):
    world = nt.SimulatedWorld(ranks)
    forward, backward, optimizer = (compile_on(g, world, preset) for g in three_graphs())
    backward.share_tensors(forward, PARAMS)
    optimizer.share_tensors(backward, PARAMS + GRADS)   # forward's through backward
    whole = compile_on(one_graph(), world, preset)
    for name, value in start_values().items():
        forward.bind_data(name, value)          # bound once, in one graph only
        whole.bind_data(name, value)
    for step in range(STEPS):
        x, t = data(step)
        for cg in (forward, backward, whole):
            cg.bind_data("x", x)
            cg.bind_data("t", t)
        forward.execute()
        backward.execute()
        optimizer.execute()
        whole.execute()
        assert abs(forward.get_output("loss") - whole.get_output("loss")) <= 1e-12
        for cg in (forward, backward, optimizer):
            for rank in range(ranks):
                cg.check_stats(rank)   # each graph's bytes still its plan's
    for name in PARAMS:
        expected = whole.get_output(name)
        for cg in (forward, backward, optimizer):   # every graph sees the last update
            np.testing.assert_allclose(cg.get_output(name), expected, rtol=0, atol=1e-12)
    assert not np.any(optimizer.get_output("w1_grad"))   # zero_grad reached backward's
    assert not np.any(backward.get_output("w1_grad"))


def test_shared_tiles_are_the_same_buffers_on_every_rank():
    world = nt.SimulatedWorld(3)
    forward, backward, _ = (compile_on(g, world, "fsdp") for g in three_graphs())
    backward.share_tensors(forward, ["w1"])
    for rank, store in backward.stores.items():
        keys = [key for key in store.tiles if key[0] == "w1"]
        assert all(store.tiles[key] is forward.stores[rank].tiles[key] for key in keys)
    assert sum(len([k for k in s.tiles if k[0] == "w1"]) for s in backward.stores.values()) \
        == 4   # each of w1's 4 tiles on its one fsdp holder


def test_mismatches_are_refused_by_name():
    world = nt.SimulatedWorld(3)
    forward, backward, optimizer = (compile_on(g, world, "fsdp") for g in three_graphs())
    with pytest.raises(ValueError, match="'x'.*not persistent"):
        backward.share_tensors(forward, ["x"])
    with pytest.raises(ValueError, match="'h1'.*no tensor 'h1'"):
        optimizer.share_tensors(forward, ["h1"])
    with pytest.raises(ValueError, match="different worlds"):
        compile_on(three_graphs()[1], nt.SimulatedWorld(3), "fsdp").share_tensors(
            forward, PARAMS)
    other_tiles = nt.compile(three_graphs()[1], comm=world, distribution="fsdp",
                             tiling=nt.TilingStrategy.manual({"w1": [3, 5]}))
    with pytest.raises(ValueError, match="'w1'.*the tiling differs"):
        other_tiles.share_tensors(forward, ["w1"])
    on_rank_0 = compile_on(three_graphs()[1], world, "single")
    with pytest.raises(ValueError, match="'w1'.*the tile holders differ"):
        on_rank_0.share_tensors(forward, ["w1"])
    for shape, dtype, what in (([7, 5], "fp64", "shape"), ([6, 5], "fp32", "dtype")):
        g = nt.LogicalGraph("other")
        g.tensor(shape, "w1", dtype, persistent=True)
        with pytest.raises(ValueError, match=f"'w1'.*the {what} differs"):
            nt.compile(g, comm=world, distribution="fsdp").share_tensors(forward, ["w1"])
    offloading = nt.compile(three_graphs()[1], comm=world, distribution="fsdp",
                            memory_budget=1 << 30)
    with pytest.raises(ValueError, match="'w1'.*plans offloading"):
        offloading.share_tensors(forward, ["w1"])
    assert backward.links == []   # nothing shared by a refused call


def seed_executable(logical, world, tiles):
    physical = PhysicalGraph(logical, comm=world)
    physical.set_tiling(nt.TilingStrategy.explicit(tiles, target_tile_bytes=64))
    nt.DistributionPreset.apply_fsdp(physical, num_nodes=world.size)
    return ExecutableGraph(physical)


@pytest.mark.parametrize("ranks", [1, 3])
def test_seed_executables_share_parameters_and_gradients(ranks):
    """Seed API: a two-layer graph and a one-layer probe share W1 and W1's gradient;
    W1 initialised in one is what the other computes with, and the probe's backward
    writes the gradient the other graph reads."""
    world = nt.SimulatedWorld(ranks)
    tiles = {name: [[0, 1, 5], [0, 4, 6]] for name in ("W1", "W1_grad")}   # 1+4 by 4+2
    two = LogicalGraph("two_layers")
    x = two.input(TensorSpec([3, 5], "fp64"), name="x")
    w1 = two.parameter(TensorSpec([5, 6], "fp64"), name="W1")
    w2 = two.parameter(TensorSpec([6, 2], "fp64"), name="W2")
    two.output(two.matmul(two.gelu(two.matmul(x, w1)), w2), name="y")
    probe = LogicalGraph("probe")
    xp = probe.input(TensorSpec([3, 5], "fp64"), name="x")
    probe.output(probe.matmul(xp, probe.parameter(TensorSpec([5, 6], "fp64"), name="W1")),
                 name="h")
    model, prober = seed_executable(two, world, tiles), seed_executable(probe, world, tiles)
    assert [d.boundaries for d in model.cg.plan.tilings["W1"].dims] == [(0, 1, 5), (0, 4, 6)]
    assert prober.share_parameters(model) == ["W1", "W1_grad"]
    model.init_parameters("normal")
    x_value = np.random.default_rng(3).standard_normal((3, 5))
    prober.bind_input("x", x_value)
    prober.execute()                      # no bind of W1: the model's values
    w1_value = model.get_output("W1")
    assert np.any(w1_value)
    np.testing.assert_allclose(prober.get_output("h"), x_value @ w1_value, rtol=1e-12)
    dy = np.ones((3, 6))
    prober.bind_output_grad("h", dy)
    prober.backward()
    np.testing.assert_allclose(model.get_parameter_grad("W1"), x_value.T @ dy, rtol=1e-12)
    with pytest.raises(ValueError, match="'W2' is not a parameter of both"):
        prober.share_parameters(model, ["W2"])


def test_seed_executables_sharing_run_in_the_order_started(monkeypatch):
    """While one graph's execute_async runs, a graph sharing its tensors refuses reads,
    stages binds, and its own program waits: it sees the finished values."""
    world = nt.SimulatedWorld(2)
    first, second = LogicalGraph("first"), LogicalGraph("second")
    w = first.parameter(TensorSpec([4, 3], "fp64"), name="W")
    first.output(first.gelu(w), name="y")
    w2 = second.parameter(TensorSpec([4, 3], "fp64"), name="W")
    second.output(second.gelu(w2), name="z")
    a, b = (ExecutableGraph(PhysicalGraph(g, comm=world)) for g in (first, second))
    b.share_parameters(a)
    a.init_parameters("ones")
    release, original = threading.Event(), a.cg.execute

    def held_execute(phases=None):
        assert release.wait(30)
        original(phases=phases)
        a.cg.stores[0].tiles[("W", (0, 0))][...] = 2.0   # a write b must see

    monkeypatch.setattr(a.cg, "execute", held_execute)
    handle = a.execute_async()
    with pytest.raises(RuntimeError, match="graph 'first' is running.*shares tensors with"):
        b.get_output("W")
    b_handle = b.execute_async()          # waits for a's program
    assert not b_handle.is_complete()
    release.set()
    nt.TaskGroup([handle, b_handle]).wait_all()
    expected = 0.5 * 2.0 * (1 + math.erf(2.0 / math.sqrt(2)))
    np.testing.assert_allclose(b.get_output("z"), np.full((4, 3), expected), rtol=1e-12)
