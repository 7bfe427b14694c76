"""Distribution: TileDistribution factories and the presets (plain pytest)."""

import numpy as np
import pytest

import nntile_spmd as nt
from nntile_spmd import REPLICATED, Preset, TileDistribution, TilingStrategy

R = REPLICATED


def diagonal_owner(coord, grid, nranks):
    return (coord[0] + coord[1]) % nranks


# distribution, tile grid, nranks, expected owners (grid-shaped; tile (i, j) at [i][j])
FACTORIES = [
    (TileDistribution.round_robin(), (2, 3), 4, [[0, 2, 0], [1, 3, 1]]),   # column-major count
    (TileDistribution.round_robin(offset=1), (3,), 2, [1, 0, 1]),
    (TileDistribution.round_robin(), (), 3, 0),
    (TileDistribution.block(), (2, 3), 2, [[0, 0, 1], [0, 1, 1]]),
    (TileDistribution.block(), (5,), 5, [0, 1, 2, 3, 4]),
    (TileDistribution.block_along_dim(1), (2, 3), 2, [[0, 0, 1], [0, 0, 1]]),
    (TileDistribution.block_along_dim(0), (4,), 3, [0, 0, 1, 2]),
    (TileDistribution.block_along_dim(0), (7, 2), 7, [[r, r] for r in range(7)]),
    (TileDistribution.custom(diagonal_owner), (2, 2), 3, [[0, 1], [1, 2]]),
    # NNTile 2.0's owner vector, in column-major tile order: (0,0) (1,0) (0,1) (1,1) (0,2) (1,2)
    (TileDistribution.custom([0, 1, 2, 0, R, 1]), (2, 3), 3, [[0, 2, R], [1, 0, 1]]),
    (TileDistribution.custom(np.array([[0, 2], [1, 0]])), (2, 2), 3, [[0, 2], [1, 0]]),
    (TileDistribution.custom([1]), (), 2, 1),
    (TileDistribution.replicated(), (2, 2), 3, [[R, R], [R, R]]),
    (TileDistribution.on_rank(2), (3,), 4, [2, 2, 2]),
    (TileDistribution.load_balanced([1, 3]), (4,), 2, [0, 1, 1, 1]),
    (TileDistribution.load_balanced([1, 1, 1]), (6,), 3, [0, 0, 1, 1, 2, 2]),
]


@pytest.mark.parametrize("distribution, grid, nranks, owners", FACTORIES, ids=repr)
def test_factory_owners(distribution, grid, nranks, owners):
    assert distribution.owners(grid, nranks).tolist() == owners


@pytest.mark.parametrize("distribution, grid, nranks", [
    (TileDistribution.on_rank(3), (2,), 2),
    (TileDistribution.custom(lambda coord, grid, nranks: nranks), (2,), 2),
    (TileDistribution.custom([0, 1, 0]), (2,), 2),      # 3 owners for 2 tiles
    (TileDistribution.custom([0, 2]), (2,), 2),         # rank 2 of 2
    (TileDistribution.load_balanced([1, 2, 3]), (4,), 2),
    (TileDistribution.block_along_dim(2), (2, 2), 2),
])
def test_factory_errors(distribution, grid, nranks):
    with pytest.raises(ValueError):
        distribution.owners(grid, nranks)


@pytest.mark.parametrize("owners", ["01", [0, 1.5], [True, 0], None, [0, "a"]])
def test_custom_owner_list_must_be_integer_ranks(owners):
    with pytest.raises(TypeError, match="custom: expected a function or a list of integer"):
        TileDistribution.custom(owners)


def test_custom_owner_list_errors_name_the_tensor():
    g = nt.LogicalGraph("g")
    x = g.tensor([4], "x", external=True)
    nt.ops.relu(x, "y")
    with pytest.raises(ValueError, match="tensor 'x': custom distribution lists 3 owners "
                                         "for a grid of \\[2\\] = 2 tiles"):
        nt.build_plan(g, 2, TilingStrategy.manual({"x": [2]}),
                      {"x": TileDistribution.custom([0, 1, 1])})
    assert repr(TileDistribution.custom(list(range(10)))) == \
        "custom([0, 1, 2, 3, 4, 5, 6, 7, ...])"


IN, HIDDEN, OUT, BATCH = 12, 16, 4, 24


def training_graph():
    """A two-layer MLP with gradients and Adam state (all built from plain ops)."""
    g = nt.LogicalGraph("mlp")
    x = g.tensor([IN, BATCH], "x", external=True)
    target = g.tensor([OUT, BATCH], "target", external=True)
    w1 = g.tensor([HIDDEN, IN], "w1", requires_grad=True, persistent=True)
    w2 = g.tensor([OUT, HIDDEN], "w2", requires_grad=True, persistent=True)
    h = nt.ops.gelu(nt.ops.gemm(w1, x, "h"), "a")
    loss = nt.ops.mse_loss(nt.ops.gemm(w2, h, "y"), target, "loss")
    grads = nt.grad(g, loss, [w1, w2])
    with g.phase("optimizer"):
        step = g.tensor([], "step", dtype="int64", persistent=True)
        nt.ops.add_scalar(step, 1)
        for param, grad in zip((w1, w2), grads):
            m = g.tensor(param.shape, f"{param.name}_m", persistent=True)
            v = g.tensor(param.shape, f"{param.name}_v", persistent=True)
            nt.ops.adam_step(step, grad, param, m, v)
    return g


def plan_of(distribution, nranks=3):
    return nt.build_plan(training_graph(), nranks, TilingStrategy.manual(
        {"x": [4, 4], "w1": [4, 4], "w2": [2, 4]}), distribution)


def family(name):
    """A parameter, its gradient and its optimizer state."""
    return [name, f"{name}_grad", f"{name}_m", f"{name}_v"]


def test_ddp_blocks_the_batch_and_replicates_parameters():
    plan = plan_of("ddp")
    for name in ("x", "target", "h", "a", "y"):
        batch_dim = plan.graph.get_tensor(name).ndim - 1
        assert plan.distributions[name] == TileDistribution.block_along_dim(batch_dim), name
    for name in family("w1") + family("w2"):
        assert plan.distributions[name] == TileDistribution.replicated(), name


def test_fsdp_shards_parameters_with_their_gradient_and_state():
    plan = plan_of("fsdp")
    assert plan.distributions["x"] == TileDistribution.block_along_dim(1)
    for param in ("w1", "w2"):
        owners = [plan.owners[name] for name in family(param)]
        assert all(np.array_equal(owners[0], other) for other in owners[1:]), param
        assert (owners[0] != REPLICATED).all()
    assert set(plan.owners["w1"].reshape(-1).tolist()) == {0, 1, 2}   # spread, not on one rank


def test_tp_blocks_the_hidden_axis_and_replicates_the_batch():
    plan = plan_of("tp")
    assert plan.distributions["w1"] == TileDistribution.block_along_dim(0)   # [HIDDEN, IN]
    assert plan.distributions["w2"] == TileDistribution.block_along_dim(1)   # [OUT, HIDDEN]
    assert plan.distributions["h"] == TileDistribution.block_along_dim(0)    # [HIDDEN, BATCH]
    for name in ("x", "target", "y"):
        assert plan.distributions[name] == TileDistribution.replicated(), name
    for param in ("w1", "w2"):
        owners = [plan.owners[name] for name in family(param)]
        assert all(np.array_equal(owners[0], other) for other in owners[1:]), param


def test_single_puts_everything_on_rank_zero():
    plan = plan_of("single")
    assert all((owners == 0).all() for owners in plan.owners.values())


def test_overrides_apply_on_top_of_a_preset():
    preset = Preset("fsdp", overrides={"w2": TileDistribution.replicated(),
                                       "x": TileDistribution.on_rank(2)})
    plan, base = plan_of(preset), plan_of("fsdp")
    assert (plan.owners["w2"] == REPLICATED).all() and (plan.owners["x"] == 2).all()
    for name in ("w1", "w1_grad", "w2_grad", "target", "h"):
        assert np.array_equal(plan.owners[name], base.owners[name]), name


def test_a_dict_distribution_overrides_single():
    plan = plan_of({"w1": TileDistribution.round_robin()})
    assert plan.owners["w1"].reshape(-1, order="F").tolist()[:4] == [0, 1, 2, 0]
    assert (plan.owners["w2"] == 0).all()


@pytest.mark.parametrize("preset", ["single", "ddp", "fsdp", "tp"])
def test_a_preset_for_more_nodes_folds_them_onto_the_ranks(preset):
    """Preset(nodes=6) on 3 ranks: the 6-rank plan's owners, node n on rank n % 3."""
    folded, unfolded = plan_of(Preset(preset, nodes=6)), plan_of(preset, nranks=6)
    for name, owners in unfolded.owners.items():
        assert np.array_equal(folded.owners[name],
                              np.where(owners >= 0, owners % 3, owners)), name
    assert max(owners.max() for owners in unfolded.owners.values()) >= 3 or preset == "single"


def test_folding_errors():
    with pytest.raises(ValueError,
                       match="made for 8 nodes, which do not fold onto the plan.s 3 "
                             "rank.*multiple"):
        plan_of(Preset("fsdp", nodes=8))
    with pytest.raises(ValueError, match="'w1'.*round_robin\\(\\) was made for 2 nodes, "
                                         "the plan has 6"):
        plan_of(Preset("ddp", overrides={"w1": TileDistribution.round_robin(2)}, nodes=6))
    with pytest.raises(ValueError, match="made for 4 nodes, which do not fold onto.*3"):
        TileDistribution.round_robin(4).owners((2, 2), 3)
    assert TileDistribution.round_robin(6, offset=4).owners((5,), 3).tolist() == \
        [1, 2, 0, 1, 2]   # nodes 4 5 0 1 2


def test_preset_errors():
    with pytest.raises(ValueError, match="unknown distribution preset"):
        Preset("zero3")
    with pytest.raises(KeyError, match="nope"):
        plan_of(Preset("ddp", overrides={"nope": TileDistribution.replicated()}))
    with pytest.raises(TypeError):
        plan_of(42)


@pytest.mark.parametrize("preset", ["single", "ddp", "fsdp", "tp"])
@pytest.mark.parametrize("nranks", [1, 2, 3, 5])
def test_every_preset_runs_the_training_step(preset, nranks):
    """The whole graph (forward, backward, Adam) plans and runs with exact analysis."""
    from helpers import stat_problems
    rng = np.random.default_rng(nranks)
    arrays = {"x": rng.standard_normal((IN, BATCH)), "target": rng.standard_normal((OUT, BATCH)),
              "w1": rng.standard_normal((HIDDEN, IN)), "w2": rng.standard_normal((OUT, HIDDEN))}
    results = []
    for distribution, world in ((preset, nt.SimulatedWorld(nranks)), ("single", None)):
        cg = nt.compile(training_graph(), comm=world or nt.SimulatedWorld(1),
                        tiling=TilingStrategy.manual({"x": [5, 7], "w1": [5, 5]}),
                        distribution=distribution)
        for name, array in arrays.items():
            cg.bind_data(name, array.astype(np.float32))
        cg.execute()
        assert not stat_problems(cg)
        results.append({name: cg.get_output(name) for name in ("w1_grad", "w2_grad")})
    for name in results[1]:
        np.testing.assert_allclose(results[0][name], results[1][name], rtol=1e-4, atol=1e-5)


def residual_mlp(blocks=2, width=8, batch=6):
    """x -> x + W_down gelu(W_up x), repeated: the model axis is shared by every block."""
    g = nt.LogicalGraph("residual")
    stream = g.tensor([width, batch], "x", dtype="fp64", external=True)
    for block in range(blocks):
        up = g.tensor([4 * width, width], f"up{block}", "fp64", requires_grad=True,
                      persistent=True)
        down = g.tensor([width, 4 * width], f"down{block}", "fp64", requires_grad=True,
                        persistent=True)
        inner = nt.ops.gelu(nt.ops.gemm(up, stream, f"h{block}"), f"a{block}")
        stream = nt.ops.add(1.0, stream, 1.0, nt.ops.gemm(down, inner, f"y{block}"),
                            f"x{block + 1}")
    stream.mark_output()
    return g


def test_tp_splits_each_blocks_inner_axis_megatron_style():
    plan = nt.build_plan(residual_mlp(), 2, nt.TilingStrategy.auto(256), "tp")
    for block in range(2):
        assert plan.distributions[f"up{block}"] == TileDistribution.block_along_dim(0)
        assert plan.distributions[f"down{block}"] == TileDistribution.block_along_dim(1)
        assert plan.distributions[f"a{block}"] == TileDistribution.block_along_dim(0)
        # the residual stream stays whole on every rank (one all-reduce per block)
        assert plan.distributions[f"x{block + 1}"] == TileDistribution.replicated()
    assert plan.tilings["h0"].grid[0] >= 2


