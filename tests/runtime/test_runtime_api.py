"""CompiledGraph's user-facing contract on a SimulatedWorld (plain pytest): errors
raised early and clearly, persistent state across executes, updates, phases,
bind_tiles, shape bindings and the receive window."""

import numpy as np
import pytest
from helpers import stat_problems

import nntile_spmd as nt
from nntile_spmd import PlanError, TilingStrategy


def layer_graph(batch=12):
    """y = w @ x (an output), h = gelu(y) an intermediate, s = sum(h) an output."""
    g = nt.LogicalGraph("layer")
    x = g.tensor([6, batch], "x", dtype="fp64", external=True)
    w = g.tensor([5, 6], "w", dtype="fp64", requires_grad=True, persistent=True)
    y = nt.ops.gemm(w, x, "y").mark_output()
    nt.ops.sum(nt.ops.gelu(y, "h"), "s").mark_output()
    return g


TILING = TilingStrategy.manual({"x": [4, 5], "w": [2, 4]})


def compiled(graph=None, nranks=3, distribution="fsdp", **options):
    return nt.compile(graph or layer_graph(), comm=nt.SimulatedWorld(nranks), tiling=TILING,
                      distribution=distribution, **options)


RNG = np.random.default_rng(7)
X, W = RNG.standard_normal((6, 12)), RNG.standard_normal((5, 6))


def test_reading_a_tensor_nobody_writes_is_a_plan_error_at_compile():
    g = nt.LogicalGraph("unwritten")
    x = g.tensor([4, 3], "x", external=True)
    y = g.tensor([4, 3], "y")                      # neither input nor persistent nor written
    nt.ops.add(1.0, x, 1.0, y, "z").mark_output()
    with pytest.raises(PlanError, match=r"reads y\[0,0\] before anything writes it"):
        nt.compile(g, comm=nt.SimulatedWorld(2))


# bad bind_data calls: name, array, error, message
BAD_BINDS = [
    ("x", np.zeros((6, 11)), ValueError, r"shape \[6, 11\], expected \[6, 12\]"),
    ("x", np.zeros((12, 6)), ValueError, "shape"),
    ("x", np.zeros((6, 12), dtype=np.float32), TypeError, "dtype float32, expected float64"),
    ("x", np.zeros((6, 12), dtype=np.int64), TypeError, "no implicit casts"),
    ("nope", np.zeros((6, 12)), KeyError, "no tensor 'nope'"),
    ("h", np.zeros((5, 12)), ValueError, "intermediate"),
]


@pytest.mark.parametrize("name, array, error, message", BAD_BINDS)
def test_bind_data_rejects_before_anything_moves(name, array, error, message):
    cg = compiled()
    cg.bind_data("x", X)
    before = {rank: {key: tile.copy() for key, tile in store.tiles.items()}
              for rank, store in cg.stores.items()}
    with pytest.raises(error, match=message):
        cg.bind_data(name, array)
    for rank, store in cg.stores.items():   # nothing was (partly) written
        assert all(np.array_equal(store[key], tile) for key, tile in before[rank].items())
    assert set(cg.bound) == {"x"}


def test_simulated_bind_tiles_must_cover_every_rank():
    cg = compiled()
    cg.bind_data("w", W)
    spec = cg.plan.tilings["x"]
    for rank in range(cg.world.size):
        tiles = {coord: np.asfortranarray(X[spec.tile_slices(coord)])
                 for coord in cg.local_tiles("x", rank)}
        cg.bind_tiles("x", tiles, rank=rank)
        if rank < cg.world.size - 1:   # some simulated ranks still lack their tiles of x
            with pytest.raises(RuntimeError, match="'x'"):
                cg.execute()
    cg.execute()
    assert np.allclose(cg.get_output("y"), W @ X)


def test_get_output_of_an_intermediate_raises():
    cg = compiled()
    cg.bind_data("x", X)
    cg.bind_data("w", W)
    cg.execute()
    with pytest.raises(ValueError, match=r"h\[5, 12\]:fp64 is not kept"):
        cg.get_output("h")
    with pytest.raises(KeyError, match="nope"):
        cg.get_output("nope")


def test_execute_before_binding_names_the_missing_inputs():
    cg = compiled()
    with pytest.raises(RuntimeError, match=r"\['x', 'w'\]"):
        cg.execute()
    cg.bind_data("w", W)
    with pytest.raises(RuntimeError, match=r"\['x'\]"):
        cg.execute()


def symbolic_graph():
    g = nt.LogicalGraph("symbolic")
    x = g.tensor([6, "batch"], "x", dtype="fp64", external=True)
    w = g.tensor([5, 6], "w", dtype="fp64", requires_grad=True, persistent=True)
    nt.ops.gemm(w, x, "y").mark_output()
    return g


def test_symbolic_graph_needs_shape_bindings():
    with pytest.raises(PlanError, match=r"unbound symbolic dims \['batch'\]"):
        nt.compile(symbolic_graph(), comm=nt.SimulatedWorld(2))


def test_compile_with_shape_bindings_runs():
    cg = nt.compile(symbolic_graph(), comm=nt.SimulatedWorld(2), distribution="ddp",
                    shape_bindings={"batch": 12}, tiling=TilingStrategy.manual({"x": [4, 5]}))
    cg.bind_data("x", X)
    cg.bind_data("w", W)
    cg.execute()
    np.testing.assert_allclose(cg.get_output("y"), W @ X, rtol=1e-12)
    assert not stat_problems(cg)


def training_graph(lr):
    """Forward y = w @ x; "gradient" dw = y x^T (of 0.5 |y|^2); update w -= lr dw."""
    g = nt.LogicalGraph("sgd")
    x = g.tensor([6, 12], "x", dtype="fp64", external=True)
    w = g.tensor([5, 6], "w", dtype="fp64", requires_grad=True, persistent=True)
    count = g.tensor([], "count", dtype="int64", persistent=True).mark_output()
    y = nt.ops.gemm(w, x, "y").mark_output()
    with g.phase("backward"):
        dw = nt.ops.gemm(y, x, "dw", trans_b=True).mark_output()
    with g.phase("optimizer"):
        nt.ops.add_inplace(-lr, dw, 1.0, w)
        nt.ops.add_scalar(count, 1)
    return g


@pytest.mark.parametrize("distribution", ["single", "ddp", "fsdp", "tp"])
def test_update_added_last_changes_w_for_the_next_execute(distribution):
    lr = 0.01
    cg = compiled(training_graph(lr), 3, distribution)
    cg.bind_data("x", X)
    cg.bind_data("w", W)
    w = W.copy()
    for step in range(1, 4):
        cg.execute()
        y = w @ X
        np.testing.assert_allclose(cg.get_output("y"), y, rtol=1e-12)
        w = w - lr * (y @ X.T)
        np.testing.assert_allclose(cg.get_output("w"), w, rtol=1e-12)
        assert cg.get_output("count") == step            # persistent state survives
        assert not stat_problems(cg)


def test_phases_run_only_their_ops():
    cg = compiled(training_graph(0.01), 2, "ddp")
    cg.bind_data("x", X)
    cg.bind_data("w", W)
    cg.execute(phases=["forward"])
    np.testing.assert_allclose(cg.get_output("y"), W @ X, rtol=1e-12)
    assert np.array_equal(cg.get_output("w"), W) and cg.get_output("count") == 0
    assert not stat_problems(cg, phases=["forward"])
    assert cg.estimate_flops(phases="forward") == 2 * 5 * 6 * 12
    cg.execute(phases=["backward"])
    np.testing.assert_allclose(cg.get_output("dw"), (W @ X) @ X.T, rtol=1e-12)
    assert np.array_equal(cg.get_output("w"), W) and cg.get_output("count") == 0
    assert not stat_problems(cg, phases="backward")
    cg.execute(phases=("optimizer",))
    np.testing.assert_allclose(cg.get_output("w"), W - 0.01 * (W @ X) @ X.T, rtol=1e-12)
    assert cg.get_output("count") == 1
    with pytest.raises(ValueError, match="unknown phase"):
        cg.execute(phases=["warmup"])


@pytest.mark.parametrize("nranks", [1, 2, 3, 4])
def test_bind_tiles_with_local_tiles(nranks):
    cg = compiled(nranks=nranks, distribution="fsdp")
    for name, array in (("x", X), ("w", W)):
        spec = cg.plan.tilings[name]
        for rank in range(nranks):
            tiles = {coord: array[spec.tile_slices(coord)] for coord in cg.local_tiles(name, rank)}
            cg.bind_tiles(name, tiles, rank=rank)
    cg.execute()
    np.testing.assert_allclose(cg.get_output("y"), W @ X, rtol=1e-12)
    rank = nranks - 1
    with pytest.raises(ValueError, match="holds"):   # a missing tile is named
        cg.bind_tiles("x", {}, rank=rank) if cg.local_tiles("x", rank) else \
            cg.bind_tiles("x", {(0, 0): X[:4, :5]}, rank=rank)


@pytest.mark.parametrize("window", [1, 2, 3, 8, 64])
@pytest.mark.parametrize("distribution", ["ddp", "fsdp", "tp"])
def test_receive_window_is_part_of_the_exact_peak(window, distribution):
    cg = compiled(nranks=3, distribution=distribution, window=window)
    cg.bind_data("x", X)
    cg.bind_data("w", W)
    cg.execute()
    np.testing.assert_allclose(cg.get_output("y"), W @ X, rtol=1e-12)
    assert not stat_problems(cg)


def test_dump_plan_and_fingerprint():
    cg = compiled()
    text = cg.dump_plan()
    assert "on 3 rank(s)" in text and cg.fingerprint() in text
    for rank in range(3):
        assert f"r{rank}:" in text
        assert cg.program(rank).count("\n") + 1 == len(cg.plan.program(rank))
    assert compiled().fingerprint() == cg.fingerprint()
    assert compiled(layer_graph(batch=13)).fingerprint() != cg.fingerprint()
    assert compiled(distribution="ddp").fingerprint() != cg.fingerprint()


def test_a_failed_execute_leaves_nothing_behind():
    """Rank 1 sends B to rank 0, then a kernel of rank 1 raises (Adam at step 0): the
    next execute must not consume the stale B messages nor count stale tiles."""
    g = nt.LogicalGraph("fails")
    a = g.tensor([4, 6], "A", dtype="fp64", external=True)
    b = g.tensor([6, 4], "B", dtype="fp64", external=True)
    nt.ops.gemm(a, b, "C").mark_output()
    step = g.tensor([], "step", dtype="int64", persistent=True)
    p, grad, m, v = (g.tensor([3], name, dtype="fp64", persistent=True) for name in "pgmv")
    nt.ops.adam_step(step, grad, p, m, v)
    on = {0: nt.TileDistribution.on_rank(0), 1: nt.TileDistribution.on_rank(1)}
    distribution = {"A": on[0], "C": on[0]} | dict.fromkeys(["B", "step", *"pgmv"], on[1])
    cg = nt.compile(g, comm=nt.SimulatedWorld(2), tiling=TilingStrategy.manual({"B": [3, 4]}),
                    distribution=distribution)
    b_old, b_new = RNG.standard_normal((6, 4)), RNG.standard_normal((6, 4))
    cg.bind_data("A", X[:4, :6])
    cg.bind_data("B", b_old)
    with pytest.raises(ZeroDivisionError) as raised:
        cg.execute()                               # step counter 0: 1 - beta1**0 == 0
    # the kernel's error names the op, the tile and the rank (and keeps its type)
    assert raised.value.__notes__ == ["in op adam_step_1 (kernel adam_step) computing tile "
                                      "p[0], m[0], v[0] from step[], g[0] on rank 1"]
    cg.bind_data("step", np.array(1))
    cg.bind_data("B", b_new)
    cg.execute()
    np.testing.assert_allclose(cg.get_output("C"), X[:4, :6] @ b_new, rtol=1e-12)
    assert not stat_problems(cg)


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_16_bit_graphs_run_on_a_gpu_device_as_on_the_cpu(dtype):
    """A GPU rank holds bf16 and fp16 tiles (CuPy takes ml_dtypes' bfloat16) and its
    kernels compute them in fp32, rounding on store, as the CPU does: the stand-in GPU
    (tests/stand_in_device.py) gives the CPU's bits on 2 ranks."""
    from stand_in_device import stand_in_device
    g = nt.LogicalGraph("half")
    x = g.tensor([5, 4], "x", dtype="fp32", external=True)
    h = nt.ops.gelu(nt.ops.cast(x, dtype, "h"), "a")
    nt.ops.cast(nt.ops.multiply(h, h, "m"), "fp32", "y").mark_output()
    data = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    results = []
    for device in ("cpu", stand_in_device()):
        cg = nt.compile(g, comm=nt.SimulatedWorld(2), device=device, distribution="ddp",
                        tiling=TilingStrategy.manual({"x": [2, 3]}))
        cg.bind_data("x", data)
        cg.execute()
        results.append(cg.get_output("y"))
    np.testing.assert_array_equal(results[0], results[1])
