"""The seed's three-stage API (docs/seed_api.md): the NNTile 2.0 plan's two examples run
with only their import lines changed (seed_examples.py), their results against NumPy,
output gradients against finite differences, every preset and rank count giving the same
numbers, parameters initialised alike on any ranks and tiling, async execution.

Multi-rank runs on real MPI ranks: test_seed_api_mpi.py.
"""

import re
import threading

import numpy as np
import pytest
import seed_examples as ex

import nntile_spmd as nt
from nntile_spmd.graph import ExecutableGraph, PhysicalGraph, TensorSpec
from nntile_spmd.seed_api.initializers import INITIALIZERS


@pytest.fixture
def checkpoint(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return ex.write_checkpoint(tmp_path / "checkpoint.pt")


def parameters_of(exe, names):
    return {name: exe.get_output(name) for name in names}


def test_approach_e_example_runs_and_matches_numpy(checkpoint, capsys):
    checkpoint = ex.write_checkpoint("checkpoint.pt", "float64")   # the fp64 run's
    ns = ex.run_example(ex.APPROACH_E, dtype="fp64")
    assert "Operations:" in capsys.readouterr().out
    exe = ns["exe"]
    params = parameters_of(exe, ["W_query", "W_key", "W_value", "W_out"])
    assert not np.allclose(params["W_query"], checkpoint["W_query"])   # init after load
    x, dy = ns["input_tensor"], ns["output_grad"]
    np.testing.assert_allclose(ns["output"], ex.layer(x, params), rtol=1e-12, atol=1e-12)
    # d<layer, dy>/dW_query along a random direction, by central differences
    direction = np.random.default_rng(5).standard_normal(params["W_query"].shape)
    step = 1e-6
    value = [np.sum(ex.layer(x, params | {"W_query": params["W_query"] + s * direction}) * dy)
             for s in (step, -step)]
    numeric = (value[0] - value[1]) / (2 * step)
    assert np.sum(ns["w_query_grad"] * direction) == pytest.approx(numeric, rel=1e-6)


def test_approach_e_example_as_written_folds_its_8_nodes(checkpoint):
    """num_nodes=8 on this process's one rank: the 8-node plan folded onto it gives
    the 8-rank run's numbers and memory_on_node."""
    ns = ex.run_example(ex.APPROACH_E)
    unfolded = ex.run_example(ex.APPROACH_E, world=nt.SimulatedWorld(8))
    assert ns["output"].dtype == np.float32 and ns["w_query_grad"].shape == (16, 16)
    for name in ("output", "w_query_grad"):
        np.testing.assert_array_equal(ns[name], unfolded[name])
    params = {name: value.astype(np.float64) for name, value in
              parameters_of(ns["exe"], ["W_query", "W_key", "W_value", "W_out"]).items()}
    np.testing.assert_allclose(ns["output"], ex.layer(ns["input_tensor"], params),
                               rtol=1e-5, atol=1e-5)
    assert ns["physical_tp"].tiling("W_query").grid == (1, 8)
    for graph in ("physical_fsdp", "physical_ddp", "physical_tp"):
        assert ns[graph].num_nodes == 8 and ns[graph].folded
        for node in (0, 5):
            assert ns[graph].memory_on_node(node) == unfolded[graph].memory_on_node(node), \
                (graph, node)
    assert ns["physical_fsdp"].memory_on_node(0) > 0


def test_section_5_2_example_runs_and_matches_numpy(checkpoint):
    ns = ex.run_example(ex.SECTION_5_2)
    p = {name: value.astype(np.float64) for name, value in checkpoint.items()}
    zero_input = np.zeros((5, 3, ex.EMBED))   # §5.2 executes without binding its input
    want = ex.layer_norm_last(ex.layer(zero_input, p), p["ln_gamma"], p["ln_beta"])
    np.testing.assert_allclose(ns["output"], want, rtol=1e-5, atol=1e-5)


LAYOUTS = [  # (ranks, preset, manual tiles or None for auto, per-tensor overrides)
    (1, "single", None, {}),
    (2, "fsdp", {"input": [3, 2, 5]}, {}),
    (3, "ddp", {"input": [2, 1, 12]}, {}),
    (3, "tp", {"input": [5, 3, 7]}, {}),
    (2, "single", {"input": [3, 3, 12]},
     {"W_query": nt.TileDistribution.round_robin(2), "W_out": nt.TileDistribution.replicated()}),
    (4, "fsdp", {"input": [4, 2, 5]}, {}),
]


def run_layer(ranks, preset, tiles, overrides, x, dy, initializer="kaiming_normal"):
    physical = PhysicalGraph(ex.layer_graph(), num_nodes=ranks, comm=nt.SimulatedWorld(ranks))
    physical.set_tiling(nt.TilingStrategy.manual(tiles) if tiles
                        else nt.TilingStrategy.auto_tiling(target_tile_bytes=256))
    physical.set_distribution(preset)
    for name, distribution in overrides.items():
        physical.set_tensor_distribution(name, distribution)
    exe = ExecutableGraph(physical)
    exe.init_parameters(initializer, seed=3)
    exe.bind_input("input", x)
    exe.execute()
    output = exe.get_output("output")
    exe.bind_output_grad("output", dy)
    exe.backward()
    grads = {name: exe.get_parameter_grad(name) for name in ex.PARAMETERS if name[0] == "W"}
    return output, grads, parameters_of(exe, grads)


def test_every_layout_gives_the_same_output_and_gradients():
    inputs = ex.example_inputs(np.float64, seed=2)
    x, dy = inputs["input_tensor"], inputs["output_grad"]
    reference = run_layer(*LAYOUTS[0], x, dy)
    np.testing.assert_allclose(reference[0], ex.layer(x, reference[2]), rtol=1e-12, atol=1e-12)
    for layout in LAYOUTS[1:]:
        output, grads, params = run_layer(*layout, x, dy)
        np.testing.assert_array_equal(params["W_out"], reference[2]["W_out"])
        np.testing.assert_allclose(output, reference[0], rtol=0, atol=1e-12, err_msg=str(layout))
        for name, grad in grads.items():
            np.testing.assert_allclose(grad, reference[1][name], rtol=0, atol=1e-12,
                                       err_msg=f"{layout} {name}")


@pytest.mark.parametrize("initializer", sorted(INITIALIZERS))
def test_init_parameters_same_on_any_ranks_and_tiling(initializer):
    g = nt.LogicalGraph("init")
    w = g.parameter(TensorSpec([7, 10], "fp64"), "w")
    b = g.parameter(TensorSpec([10], "fp32"), "b")
    g.output(g.gelu(g.add(w, w)), "y")
    g.output(g.relu(b), "z")
    seen = []
    for ranks, tiles in ((1, [7, 10]), (2, [3, 4]), (3, [2, 10]), (4, [5, 3])):
        physical = PhysicalGraph(g, comm=nt.SimulatedWorld(ranks))
        physical.set_tiling(nt.TilingStrategy.manual({"w": tiles, "b": tiles[1:]}))
        physical.set_distribution("fsdp")
        exe = ExecutableGraph(physical)
        exe.init_parameters(initializer)
        seen.append((exe.get_output("w"), exe.get_output("b")))
    for w_values, b_values in seen[1:]:
        np.testing.assert_array_equal(w_values, seen[0][0])
        np.testing.assert_array_equal(b_values, seen[0][1])
    kind, first, second = INITIALIZERS[initializer](7, 10)
    values = seen[0][0]
    if kind == "constant":
        assert (values == first).all()
    elif kind == "uniform":
        assert first <= values.min() and values.max() <= second and values.std() > 0
    else:
        assert abs(values.std() - second) < 0.3 * second


def test_init_parameters_per_tensor_and_seed():
    physical = PhysicalGraph(ex.layer_graph(), comm=nt.SimulatedWorld(2))
    exe = ExecutableGraph(physical)
    exe.init_parameters({"W_query": "ones", "W_key": "zeros", "W_value": "normal",
                         "W_out": "normal"})
    assert (exe.get_output("W_query") == 1).all() and (exe.get_output("W_key") == 0).all()
    assert not np.array_equal(exe.get_output("W_value"), exe.get_output("W_out"))
    before = exe.get_output("W_out")
    exe.init_parameters({"W_out": "normal"}, seed=1)
    assert not np.array_equal(before, exe.get_output("W_out"))
    with pytest.raises(ValueError, match="'glorot' for W_out is not one of"):
        exe.init_parameters({"W_out": "glorot"})
    with pytest.raises(KeyError, match="no parameter"):
        exe.init_parameters({"input": "zeros"})


@pytest.mark.parametrize("file_name", ["params.safetensors", "folder", "params.pt"])
def test_save_and_load_parameters_across_rank_counts(tmp_path, file_name):
    path = tmp_path / file_name
    saver = ExecutableGraph(PhysicalGraph(ex.layer_graph(), comm=nt.SimulatedWorld(3)))
    saver.init_parameters("xavier_normal")
    saver.save_parameters(path)
    physical = PhysicalGraph(ex.layer_graph(), comm=nt.SimulatedWorld(2))
    physical.set_distribution("fsdp")
    loader = ExecutableGraph(physical)
    loader.load_parameters(path)
    for name in ("W_query", "W_out"):
        np.testing.assert_array_equal(loader.get_output(name), saver.get_output(name))


def test_num_nodes_the_world_size_or_a_multiple():
    with pytest.raises(ValueError, match="num_nodes=8.*3 rank.*3 or a multiple.*SimulatedWorld"):
        PhysicalGraph(ex.layer_graph(), num_nodes=8, comm=nt.SimulatedWorld(3))
    physical = PhysicalGraph(ex.layer_graph(), comm=nt.SimulatedWorld(2))
    physical.set_tensor_distribution("W_query", nt.TileDistribution.round_robin(3))
    with pytest.raises(ValueError, match="W_query.*made for 3 nodes"):
        physical.compile()
    # a distribution made for 4 nodes in a 2-node plan is an error, not folded
    physical = PhysicalGraph(ex.layer_graph(), comm=nt.SimulatedWorld(2))
    physical.set_tensor_distribution("W_query", nt.TileDistribution.round_robin(4))
    with pytest.raises(ValueError, match="W_query.*made for 4 nodes, the plan has 2"):
        physical.compile()
    physical = PhysicalGraph(ex.layer_graph(), comm=nt.SimulatedWorld(2))
    physical.set_tensor_distribution(
        "W_key", nt.TileDistribution.block_along_dim(grid_shape=[1, 2], dim=1, num_nodes=2))
    with pytest.raises(ValueError, match="W_key.*tile grid \\[1, 2\\].*\\[1, 1\\]"):
        physical.compile()
    physical = PhysicalGraph(ex.layer_graph(), num_nodes=4, comm=nt.SimulatedWorld(2))
    physical.set_distribution({"dp": 2, "tp": 2})   # a mesh is not folded
    with pytest.raises(ValueError, match="num_nodes=4 on 2 rank.*not .*launch 4 ranks"):
        physical.compile()
    with pytest.raises(ValueError, match="node must be in 0..3, got 4"):
        physical_on(4, 2, "fsdp").compile().memory_on_node(4)


FOLDINGS = [  # (nodes, ranks, preset, manual tiles, per-tensor overrides)
    (4, 2, "fsdp", {"input": [2, 2, 5], "W_query": [5, 3]}, {}),
    (6, 3, "tp", {"input": [3, 2, 7], "W_query": [7, 3]}, {}),
    (6, 2, "ddp", {"input": [2, 1, 6], "W_key": [6, 5]},
     {"W_out": nt.TileDistribution.round_robin(6, offset=1),
      "W_key": nt.TileDistribution.block_along_dim(grid_shape=[3, 4], dim=0, num_nodes=6)}),
]


def physical_on(nodes, ranks, preset, tiles=None, overrides=(), comm=None):
    physical = PhysicalGraph(ex.layer_graph(), num_nodes=nodes,
                             comm=comm or nt.SimulatedWorld(ranks))
    physical.set_tiling(nt.TilingStrategy.manual(tiles) if tiles
                        else nt.TilingStrategy.auto_tiling(target_tile_bytes=256))
    physical.set_distribution(preset)
    for name, distribution in dict(overrides).items():
        physical.set_tensor_distribution(name, distribution)
    return physical


@pytest.mark.parametrize("nodes, ranks, preset, tiles, overrides", FOLDINGS)
def test_folded_nodes_give_the_unfolded_plan_and_numbers(nodes, ranks, preset, tiles,
                                                         overrides):
    """`nodes` nodes on `ranks` ranks: owners are those of the nodes-rank run modulo the
    ranks, outputs and gradients those of it, memory_on_node those of its ranks."""
    inputs = ex.example_inputs(np.float64, seed=4)
    runs = []
    for world_size in (ranks, nodes):
        physical = physical_on(nodes, world_size, preset, tiles, overrides)
        exe = ExecutableGraph(physical)
        exe.init_parameters("xavier_normal", seed=2)
        exe.bind_input("input", inputs["input_tensor"])
        exe.bind_output_grad("output", inputs["output_grad"])
        exe.backward()
        runs.append((physical, exe))
    (folded, folded_exe), (unfolded, unfolded_exe) = runs
    assert folded.folded and not unfolded.folded
    owners = unfolded.compiled.plan.owners
    assert max(o.max() for o in owners.values()) >= ranks   # nodes beyond the ranks hold tiles
    for name, nodes_owners in owners.items():
        np.testing.assert_array_equal(folded.compiled.plan.owners[name],
                                      np.where(nodes_owners >= 0, nodes_owners % ranks,
                                               nodes_owners), err_msg=name)
    np.testing.assert_allclose(folded_exe.get_output("output"),
                               unfolded_exe.get_output("output"), rtol=0, atol=1e-12)
    for name in ("W_query", "W_key", "W_value", "W_out"):
        np.testing.assert_allclose(folded_exe.get_parameter_grad(name),
                                   unfolded_exe.get_parameter_grad(name), rtol=0, atol=1e-12,
                                   err_msg=name)
    planned = physical_on(nodes, ranks, preset, tiles, overrides,
                          comm=nt.PlanningWorld(nodes, nodes - 1)).compile()
    assert folded.memory_on_node(nodes - 1) == unfolded.memory_on_node(nodes - 1) == \
        planned.memory_on_node(nodes - 1)
    assert folded.memory_on_node(0) == unfolded.memory_on_node(0)


def test_graph_methods_names_and_analysis():
    g = nt.LogicalGraph("g")
    x = g.input(TensorSpec([4, 6], "fp64", requires_grad=True), "x")
    w = g.parameter(TensorSpec([6, 3], "fp64"), "w")
    c = g.constant(TensorSpec([4, 3], "fp64"), "c")
    h = g.matmul(x, w)
    y = g.multiply(g.gelu(h), c, name="y")
    s = g.softmax(y, axis=1)
    g.output(s, "probs")
    assert h.name == "matmul_0" and h.shape == (4, 3) and s.name.startswith("softmax_")
    assert [t.name for t in g.inputs()] == ["x"] and [t.name for t in g.parameters()] == ["w"]
    assert g.outputs() == [s] and g.resolve("probs") is s and c.role == "constant"
    assert g.producer(h).op_type == "gemm" and g.producer("x") is None
    assert [op.op_type for op in g.consumers(h)] == ["gelu"]
    assert g.topological_order() == g.ops() and g.num_parameters() == 18
    with pytest.raises(ValueError, match="already used"):
        g.output(h, "probs")
    other = nt.LogicalGraph("other")
    with pytest.raises(ValueError, match="belongs to graph 'g'"):
        other.gelu(x)
    with pytest.raises(TypeError, match="TensorSpec"):
        g.input([4], "z")


def test_requires_grad_input_gets_a_gradient():
    g = nt.LogicalGraph("g")
    x = g.input(TensorSpec([4, 6], "fp64", requires_grad=True), "x")
    w = g.parameter(TensorSpec([6, 3], "fp64"), "w")
    g.output(g.matmul(x, w), "y")
    exe = ExecutableGraph(PhysicalGraph(g, comm=nt.SimulatedWorld(2)))
    rng = np.random.default_rng(0)
    xv, wv, dy = rng.random((4, 6)), rng.random((6, 3)), rng.random((4, 3))
    exe.cg.bind_data("w", wv)
    exe.bind_input("x", xv)
    exe.execute()
    exe.bind_output_grad("y", dy)
    exe.backward()
    np.testing.assert_allclose(exe.get_parameter_grad("x"), dy @ wv.T, rtol=1e-12)
    np.testing.assert_allclose(exe.get_parameter_grad("w"), xv.T @ dy, rtol=1e-12)
    exe.backward()   # fresh gradients each time, not accumulated
    np.testing.assert_allclose(exe.get_parameter_grad("w"), xv.T @ dy, rtol=1e-12)


def small_executable():
    g = nt.LogicalGraph("g")
    x = g.input(TensorSpec([6, 4], "fp64"), "x")
    g.output(g.gelu(x), "y")
    return ExecutableGraph(PhysicalGraph(g, comm=nt.SimulatedWorld(2)))


def test_execute_async_stages_bindings_and_refuses_early_reads(monkeypatch):
    exe = small_executable()
    first, second = np.ones((6, 4)), np.full((6, 4), 2.0)
    exe.bind_input("x", first)
    release, original = threading.Event(), exe.cg.execute

    def held_execute(phases=None):
        assert release.wait(30)
        original(phases=phases)

    monkeypatch.setattr(exe.cg, "execute", held_execute)
    handle = exe.execute_async()
    assert not handle.is_complete()
    exe.bind_input("x", second)          # staged: the running program keeps `first`
    with pytest.raises(RuntimeError, match="is running"):
        exe.get_output("y")
    release.set()
    group = nt.TaskGroup([handle])
    assert group.wait_any() == 0
    group.wait_all()
    y_first = exe.get_output("y")
    exe.execute()
    y_second = exe.get_output("y")
    np.testing.assert_array_equal(y_first, np.full((6, 4), y_first[0, 0]))
    assert y_second[0, 0] > y_first[0, 0] > 0.8


def test_execute_async_result_raises_the_error():
    exe = small_executable()
    handle = exe.execute_async()          # x never bound
    assert handle.wait(30)
    with pytest.raises(RuntimeError, match="bind_data"):
        handle.result()
    with pytest.raises(RuntimeError, match="bind_data"):
        exe.synchronize()


def test_clear_buffers_forgets_inputs_and_outputs():
    exe = small_executable()
    exe.bind_input("x", np.ones((6, 4)))
    exe.execute()
    exe.clear_buffers()
    with pytest.raises(RuntimeError, match="no execute"):
        exe.get_output("y")
    with pytest.raises(RuntimeError, match="bind_data"):
        exe.execute()
    assert exe.get_stats() is not None


def test_symbolic_seq_bound_per_physical_graph():
    g = nt.LogicalGraph("dynamic")
    x = g.input(TensorSpec(["seq_len", 3, 8], "fp64"), "input")
    w = g.parameter(TensorSpec([8, 8], "fp64"), "W")
    q = g.matmul(x, w)
    g.output(g.scaled_dot_product_attention(q, q, q), "output")
    for seq in (4, 7):
        physical = PhysicalGraph(g, shape_bindings={"seq_len": seq}, comm=nt.SimulatedWorld(2))
        exe = ExecutableGraph(physical)
        exe.init_parameters("normal")
        value = np.random.default_rng(seq).random((seq, 3, 8))
        exe.bind_input("input", value)
        exe.execute()
        projected = np.tensordot(value, exe.get_output("W"), axes=1)
        np.testing.assert_allclose(exe.get_output("output"),
                                   ex.attention(projected, projected, projected), rtol=1e-12)
    assert g.symbols() == {"seq_len"}   # the logical graph stays a template


def run_with_policy(ranks, preset, policy, x, dy):
    physical = PhysicalGraph(ex.layer_graph(), comm=nt.SimulatedWorld(ranks))
    physical.set_tiling(nt.TilingStrategy.manual({"input": [2, 1, 5]}))
    physical.set_distribution(preset)
    physical.set_execution_policy(policy)
    exe = ExecutableGraph(physical)
    exe.init_parameters("xavier_uniform")
    exe.bind_input("input", x)
    exe.bind_output_grad("output", dy)
    exe.backward()
    return exe, exe.get_parameter_grad("W_query")


def test_placement_owner_computes_sums_on_the_owner_in_tile_order():
    inputs = ex.example_inputs(np.float64, seed=4)
    x, dy = inputs["input_tensor"], inputs["output_grad"]
    policy = nt.ExecutionPolicy(placement="owner_computes")
    runs = [run_with_policy(ranks, preset, policy, x, dy)
            for ranks, preset in ((1, "single"), (2, "ddp"), (3, "fsdp"), (3, "tp"))]
    assert all(exe.cg.plan.deterministic for exe, _ in runs)
    for _, grad in runs[1:]:
        np.testing.assert_array_equal(grad, runs[0][1])   # bitwise: one summation order
    auto = nt.ExecutionPolicy()
    exe, grad = run_with_policy(2, "ddp", auto, x, dy)
    assert not exe.cg.plan.deterministic   # partial sums where they move fewer bytes
    np.testing.assert_allclose(grad, runs[0][1], rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="placement must be one of"):
        nt.ExecutionPolicy(placement="affinity")


def test_preferred_gpus_are_taken_in_turn_by_a_nodes_ranks():
    """Local rank i takes preferred_gpus[i % len] (default: GPU i % count); a number the
    node lacks, or a list that names none, is an error. On the CPU the plan is the same."""
    from nntile_spmd.runtime.device import gpu_of
    assert [gpu_of(rank, 4) for rank in range(6)] == [0, 1, 2, 3, 0, 1]
    assert [gpu_of(rank, 4, (2, 3)) for rank in range(5)] == [2, 3, 2, 3, 2]
    with pytest.raises(ValueError, match="local rank 1 would take GPU 5, but this node has 4"):
        gpu_of(1, 4, (0, 5))
    inputs = ex.example_inputs(np.float64, seed=4)
    x, dy = inputs["input_tensor"], inputs["output_grad"]
    from nntile_spmd.runtime.compile_options import CompileOptions
    policy = nt.ExecutionPolicy(preferred_gpus=[1, 0])
    assert CompileOptions.checked("compile", ex.layer_graph(), policy=policy).gpus \
        == (1, 0)
    _, grad = run_with_policy(2, "ddp", policy, x, dy)
    _, plain = run_with_policy(2, "ddp", nt.ExecutionPolicy(), x, dy)
    np.testing.assert_array_equal(grad, plain)
    for bad, error in (([], ValueError), ([-1], ValueError), ("0", TypeError)):
        with pytest.raises(error, match="preferred_gpus"):
            run_with_policy(1, "single", nt.ExecutionPolicy(preferred_gpus=bad), x, dy)


def tiles_written(program: str, tensor: str) -> set:
    """The tiles of `tensor` that EXECs of one rank's program write."""
    return set(re.findall(rf"EXEC .*->{tensor}\[([\d,]+)\]", program))


@pytest.mark.parametrize("ranks", [1, 2, 3])
def test_placement_explicit_places_the_named_tensors_and_their_tasks(ranks):
    """placement="explicit" with {tensor: TileDistribution}: those tiles, and so the tasks
    writing them, on the ranks given; every sum on its owner in tile order, so the
    numbers are bitwise those of one rank owner-computes."""
    inputs = ex.example_inputs(np.float64, seed=4)
    x, dy = inputs["input_tensor"], inputs["output_grad"]
    query = ex.layer_graph().ops()[0].outputs[0].name          # x @ W_query
    placement = {"W_query": nt.TileDistribution.on_rank(ranks - 1),
                 query: nt.TileDistribution.round_robin(offset=1)}
    policy = nt.ExecutionPolicy(placement="explicit", placement_map=placement)
    exe, grad = run_with_policy(ranks, "ddp", policy, x, dy)
    plan = exe.cg.plan
    assert plan.deterministic
    assert (plan.owners["W_query"] == ranks - 1).all()
    owners = placement[query].owners(plan.tilings[query].grid, ranks)
    np.testing.assert_array_equal(plan.owners[query], owners)
    for rank in range(ranks):
        want = {",".join(map(str, coord)) for coord in zip(*np.nonzero(owners == rank))}
        assert tiles_written(exe.cg.program(rank, ("forward",)), query) == want, rank
    reference, reference_grad = run_with_policy(
        1, "single", nt.ExecutionPolicy(placement="owner_computes"), x, dy)
    np.testing.assert_array_equal(grad, reference_grad)
    np.testing.assert_array_equal(exe.get_output("output"), reference.get_output("output"))


def test_placement_explicit_errors():
    x = ex.example_inputs(np.float64)["input_tensor"]
    on_one = {"W_query": nt.TileDistribution.on_rank(1)}
    cases = [  # (preset, policy, error, message)
        ("ddp", nt.ExecutionPolicy(placement="explicit"), ValueError,
         "placement='explicit'\\) needs placement_map"),
        ("ddp", nt.ExecutionPolicy(placement="owner_computes", placement_map=on_one),
         ValueError, "placement_map=.*placement='explicit', not 'owner_computes'"),
        ({"dp": 2}, nt.ExecutionPolicy(placement="explicit", placement_map=on_one),
         ValueError, "not the mesh"),
        ("ddp", nt.ExecutionPolicy(placement="explicit",
                                   placement_map={"nope": nt.TileDistribution.on_rank(0)}),
         KeyError, "nope"),
        ("ddp", nt.ExecutionPolicy(placement="explicit", placement_map={"W_query": 1}),
         ValueError, "tensor name: TileDistribution"),
    ]
    for preset, policy, error, message in cases:
        with pytest.raises(error, match=message):
            run_with_policy(2, preset, policy, x, x)


def test_prefetch_false_brings_offloaded_tiles_back_at_use():
    inputs = ex.example_inputs(np.float64, seed=4)
    x, dy = inputs["input_tensor"], inputs["output_grad"]
    peak = run_with_policy(1, "single", nt.ExecutionPolicy(), x, dy)[0].cg.memory_on_rank(0)
    results = {}
    for prefetch in (True, False):
        policy = nt.ExecutionPolicy(enable_offloading=True, memory_budget=int(peak * 0.7),
                                    offload_threshold=1.0, prefetch=prefetch)
        exe, grad = run_with_policy(1, "single", policy, x, dy)
        results[prefetch] = (exe.cg.plan.policy.prefetch_distance, exe.cg.program(0), grad)
    assert results[True][0] == 4 and results[False][0] == 0
    assert "PREFETCH" in results[False][1] and results[True][1] != results[False][1]
    np.testing.assert_array_equal(results[True][2], results[False][2])


def test_grad_with_cotangents_of_two_outputs():
    """nt.grad(g, [y, z], wrt, cotangents=[dy, dz]): d(<y, dy> + <z, dz>)/dw."""
    g = nt.LogicalGraph("g")
    x = g.tensor([4, 5], "x", "fp64", external=True)
    w = g.tensor([5, 3], "w", "fp64", requires_grad=True, persistent=True)
    y = g.matmul(x, w, name="y")
    z = g.tanh(y, name="z")
    dy, dz = (g.tensor([4, 3], name, "fp64", external=True) for name in ("dy", "dz"))
    (dw,) = nt.grad(g, [y, z], [w], cotangents=[dy, dz])
    rng = np.random.default_rng(1)
    values = {name: rng.standard_normal(shape) for name, shape in
              (("x", (4, 5)), ("w", (5, 3)), ("dy", (4, 3)), ("dz", (4, 3)))}
    cg = nt.compile(g, comm=nt.SimulatedWorld(2), distribution="fsdp")
    for name, value in values.items():
        cg.bind_data(name, value)
    cg.execute()
    yv = values["x"] @ values["w"]
    want = values["x"].T @ (values["dy"] + values["dz"] * (1 - np.tanh(yv) ** 2))
    np.testing.assert_allclose(cg.get_output(dw.name), want, rtol=1e-12)
    with pytest.raises(ValueError, match="2 output\\(s\\) but 1 cotangent"):
        nt.grad(g, [y, z], [w], cotangents=[dy])


def test_init_parameters_holds_only_tile_sized_temporaries():
    """FSDP on 4 ranks: initialising a 2 MiB parameter tiled in 16-row tiles (64 KiB)
    allocates temporaries of a few tiles (the generator's index, hash and Box-Muller
    arrays), never the whole parameter (tracemalloc sees NumPy's allocations)."""
    import tracemalloc
    g = nt.LogicalGraph("big")
    w = g.parameter(TensorSpec([512, 512], "fp64"), "w")
    g.output(g.relu(w), "y")
    physical = PhysicalGraph(g, comm=nt.SimulatedWorld(4))
    physical.set_tiling(nt.TilingStrategy.manual({"w": [16, 512]}))
    physical.set_distribution("fsdp")
    exe = ExecutableGraph(physical)
    tracemalloc.start()
    try:
        exe.init_parameters("kaiming_normal")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    tile_bytes, whole_bytes = 16 * 512 * 8, 512 * 512 * 8
    assert peak < 12 * tile_bytes < whole_bytes / 2


def test_compute_graph_with_distribution_strategies():
    """Seed §5.1: ComputeGraph.set_distribution(DistributionStrategy...) on 4 simulated
    ranks (DDP, FSDP, HSDP = fsdp with shard_degree 2) gives the one-rank numbers."""
    rng = np.random.default_rng(7)
    xv, wv = rng.standard_normal((6, 4, 5)), rng.standard_normal((5, 3))
    results = []
    for strategy in (None, nt.DistributionStrategy.ddp(4), nt.DistributionStrategy.fsdp(4),
                     nt.DistributionStrategy.fsdp(4, shard_degree=2)):
        graph = nt.ComputeGraph("cg")
        x = graph.input([6, 4, 5], "x", dtype="fp64")
        w = graph.parameter([5, 3], "w", dtype="fp64")
        graph.gelu(graph.matmul(x, w))
        if strategy is not None:
            graph.set_distribution(strategy)
        instance = graph.instantiate(comm=nt.SimulatedWorld(1 if strategy is None else 4),
                                     tiling=nt.TilingStrategy.manual({"x": [4, 1, 5]}))
        instance.bind_input("w", wv)
        instance.bind_input("x", xv)
        instance.execute()
        results.append(instance.get_tensor("output"))
    assert isinstance(nt.DistributionStrategy.fsdp(4, shard_degree=2), nt.Mesh)
    for result in results[1:]:
        np.testing.assert_allclose(result, results[0], rtol=0, atol=1e-12)


def test_tensor_parallel_splits_the_weights_dims_it_is_given():
    """Seed §5.1's tensor_parallel(world_size, dims): dim d of every weight split over
    the ranks (w [5, 9]: dims=[1] splits its 9 columns, dims=[0] its 5 rows), on 3
    uneven ranks the one-rank numbers; a dim no weight has, or no dims, is an error."""
    rng = np.random.default_rng(8)
    xv, wv = rng.standard_normal((6, 4, 5)), rng.standard_normal((5, 9))
    results, owners = [], {}
    for dims in (None, [1], [0]):
        graph = nt.ComputeGraph("tp")
        x = graph.input([6, 4, 5], "x", dtype="fp64")
        w = graph.parameter([5, 9], "w", dtype="fp64")
        graph.gelu(graph.matmul(x, w))
        ranks = 1 if dims is None else 3
        if dims is not None:
            graph.set_distribution(nt.DistributionStrategy.tensor_parallel(ranks, dims))
        instance = graph.instantiate(comm=nt.SimulatedWorld(ranks),
                                     tiling=nt.TilingStrategy.manual({"w": [2, 4]}))
        instance.bind_input("w", wv)
        instance.bind_input("x", xv)
        instance.execute()
        results.append(instance.get_tensor("output"))
        owners[str(dims)] = instance.cg.plan.owners["w"]
    for result in results[1:]:
        np.testing.assert_allclose(result, results[0], rtol=0, atol=1e-12)
    # w's tile grid is [3, 3]: dims=[1] gives its columns to different ranks, rows alike
    assert len(set(owners["[1]"][0, :])) == 3 and len(set(owners["[1]"][:, 0])) == 1
    assert len(set(owners["[0]"][:, 0])) == 3 and len(set(owners["[0]"][0, :])) == 1
    with pytest.raises(ValueError, match="dims"):
        nt.DistributionStrategy.tensor_parallel(4, dims=[])
    graph = nt.ComputeGraph("tp")
    graph.matmul(graph.input([3, 5], "x", dtype="fp64"), graph.parameter([5, 2], "w",
                                                                         dtype="fp64"))
    graph.set_distribution(nt.DistributionStrategy.tensor_parallel(2, dims=[4]))
    with pytest.raises(ValueError, match=r"tensor_parallel\(dims=\[4\]\): no weight"):
        graph.instantiate(comm=nt.SimulatedWorld(2))


PERMUTE_LAYOUTS = [  # (ranks, preset, manual tiles or None)
    (1, "single", None),
    (2, "fsdp", {"x": [2, 2, 3]}),
    (3, "ddp", {"x": [3, 3, 1]}),
    (3, "tp", {"x": [2, 2, 3], "W": [2, 4]}),
]


@pytest.mark.parametrize("ranks, preset, tiles", PERMUTE_LAYOUTS)
def test_transpose_with_any_permutation(ranks, preset, tiles):
    """The seed's transpose(x, perm): a swap of the last two dims (the permute op) and a
    rotation (NNTile's cyclic transpose), forward and backward against NumPy."""
    g = nt.LogicalGraph("perm")
    x = g.input(TensorSpec([5, 3, 4], "fp64", requires_grad=True), "x")
    w = g.parameter(TensorSpec([3, 6], "fp64"), "W")
    swapped = g.transpose(x, [0, 2, 1])
    out = g.output(g.transpose(g.matmul(swapped, w), (2, 0, 1), name="out"))
    assert [op.op_type for op in g.ops()] == ["permute", "gemm", "transpose"]
    assert out.shape == (6, 5, 4)
    rng = np.random.default_rng(ranks)
    xv, wv, dout = rng.random((5, 3, 4)), rng.random((3, 6)), rng.random((6, 5, 4))
    physical = PhysicalGraph(g, comm=nt.SimulatedWorld(ranks))
    physical.set_tiling(nt.TilingStrategy.manual(tiles) if tiles
                        else nt.TilingStrategy.auto_tiling(target_tile_bytes=128))
    physical.set_distribution(preset)
    exe = ExecutableGraph(physical)
    exe.bind_input("x", xv)
    exe.bind_input("W", wv)
    exe.bind_output_grad("out", dout)
    exe.backward()
    x_swapped = xv.transpose(0, 2, 1)
    dy = dout.transpose(1, 2, 0)                         # the gradient of the matmul's output
    np.testing.assert_allclose(exe.get_output("out"),
                               np.tensordot(x_swapped, wv, axes=1).transpose(2, 0, 1),
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(exe.get_parameter_grad("W"),
                               np.tensordot(x_swapped, dy, axes=([0, 1], [0, 1])),
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(exe.get_parameter_grad("x"), (dy @ wv.T).transpose(0, 2, 1),
                               rtol=1e-12, atol=1e-12)


def test_transpose_forms_and_errors():
    g = nt.LogicalGraph("forms")
    x = g.input(TensorSpec([2, 3, 4]), "x")
    assert g.transpose(x).shape == (3, 4, 2)                  # NNTile's default: ndim=1
    assert g.transpose(x, ndim=2).shape == (4, 2, 3)
    assert g.transpose(x, (1, 0, 2), name="t").shape == (3, 2, 4)
    assert g.get_tensor("t").shape == (3, 2, 4)
    with pytest.raises(TypeError, match="perm .* or ndim .*not both"):
        g.transpose(x, (1, 0, 2), ndim=1)
    with pytest.raises(ValueError, match="permute.*perm=\\(1, 0\\) is not a permutation"):
        g.transpose(x, (1, 0))
