"""Pipeline parallelism (plan/pipeline.py): the `pp` preset and the pp mesh axis.

Layers go to stages from tensor names (uneven: 5 layers on 2 and 3 stages); the MLP
trains to the numbers of one rank under pp on 2 and 3 simulated ranks and under
dp x pp, fsdp x pp, tp x pp and fsdp x tp x pp (fp64, uneven tiles, Adam), with
measured traffic, FLOPs and peak bytes (the stashed micro-batch activations) equal
to the plan's on every rank; each stage's program walks the micro-batches in GPipe
order; the traffic along pp is the activations and their gradients crossing the
stage boundaries (the formula compare_strategies.py prints); graphs without layers
fail naming the graph. GPT-2: tests/models/test_gpt2_pipeline.py.
"""

import sys
from pathlib import Path

import numpy as np
import pytest

import nntile_spmd as nt
from nntile_spmd.models import build_mlp
from nntile_spmd.plan.instructions import Exec, Send
from nntile_spmd.plan.mesh import traffic_by_mesh_axis
from nntile_spmd.plan.pipeline import (named_layer, one_f_one_b_steps, tensor_layers,
                                       tensor_stages)
from nntile_spmd.train import Trainer
from nntile_spmd.train import add_optimizer

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
SIZES, BATCH = [12, 10, 8, 9, 7, 5], 13   # 5 layers: 3 + 2 on 2 stages, 2 + 2 + 1 on 3
TILES = {"x": [5, 3], "w1": [3, 5]}        # 13 samples in tiles of 3: 5 uneven micro-batches
CASES = [(2, "pp"), (3, "pp"), (4, {"dp": 2, "pp": 2}), (4, {"pp": 2, "fsdp": 2}),
         (4, {"tp": 2, "pp": 2}), (8, {"fsdp": 2, "tp": 2, "pp": 2}),
         (2, {"pp": 2, "schedule": "1f1b"}), (3, {"pp": 3, "schedule": "1f1b"}),
         (4, {"dp": 2, "pp": 2, "schedule": "1f1b"}), (4, {"tp": 2, "pp": 2, "schedule": "1f1b"}),
         (8, {"fsdp": 2, "tp": 2, "pp": 2, "schedule": "1f1b"})]


def case_id(case):
    return f"{case[1]}{case[0]}" if isinstance(case[1], str) else \
        "x".join(f"{axis}{size}" for axis, size in case[1].items())


def data():
    rng = np.random.default_rng(1)
    return {"x": np.asfortranarray(rng.standard_normal((SIZES[0], 2 * BATCH))),
            "y": rng.integers(0, SIZES[-1], 2 * BATCH).astype(np.int64)}


def train(ranks, distribution, steps=3):
    model = build_mlp(SIZES, BATCH, dtype="fp64")
    trainer = Trainer(model, "adam", comm=nt.SimulatedWorld(ranks), distribution=distribution,
                      tiling=nt.TilingStrategy.manual(TILES), progress=False, lr=1e-2)
    trainer.bind_params(model.init_params(np.random.default_rng(0)))
    return trainer.fit(data(), steps), trainer.get_params(), trainer


def mlp_plan(nranks, distribution, sizes=SIZES, batch=BATCH, tiles=TILES):
    model = build_mlp(sizes, batch, dtype="fp64")
    add_optimizer(model.graph, model.params, model.grads, "adam")
    return nt.build_plan(model.graph, nranks, nt.TilingStrategy.manual(tiles), distribution)


@pytest.fixture(scope="module")
def one_rank():
    return train(1, "single")


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_mlp_trains_as_one_rank(one_rank, case):
    ranks, distribution = case
    losses, params, trainer = train(ranks, distribution)
    reference_losses, reference_params, _ = one_rank
    np.testing.assert_allclose(losses, reference_losses, rtol=1e-12)
    for name, value in reference_params.items():
        np.testing.assert_allclose(params[name], value, rtol=1e-11, atol=1e-14, err_msg=name)
    for rank in range(ranks):   # measured traffic, peak bytes and FLOPs are the plan's
        trainer.cg.check_stats(rank)
    assert trainer.cg.estimate_communication() > 0


def test_layers_and_stages_from_names():
    model = build_mlp(SIZES, BATCH, dtype="fp64")
    layers = tensor_layers(model.graph)
    assert [layers[f"w{i}"] for i in range(1, 6)] == [1, 2, 3, 4, 5]
    assert layers["x"] == 1 and layers["y"] == 5 and layers["loss"] == 5
    assert layers["w4_grad"] == 4
    # a3 is read by layer 4, whose backward computes a3's gradient
    assert layers["a3"] == 3 and layers["a3_grad"] == 4
    two, three = tensor_stages(model.graph, 2), tensor_stages(model.graph, 3)
    assert [two[f"w{i}"] for i in range(1, 6)] == [0, 0, 0, 1, 1]
    assert [three[f"w{i}"] for i in range(1, 6)] == [0, 0, 1, 1, 2]
    assert two["x"] == 0 and two["y"] == 1 and two["a3"] == 0 and two["a3_grad"] == 1


@pytest.mark.parametrize("name,layer", [
    ("h3_q_weight", 3), ("w12", 12), ("a3_grad", 3), ("layers.3.mlp", 3), ("h.3.attn", 3),
    ("layer7", 7), ("h_in", None), ("conv2d_out", None), ("ln_f_weight", None), ("x", None)])
def test_layer_index_in_names(name, layer):
    assert named_layer(name) == layer


def test_owners_follow_the_stages():
    """dp x pp: rank = dp_index * 2 + pp_index; a stage's weights live on its pp column
    (replicas across dp), a batch tile on one rank of its stage."""
    plan = mlp_plan(4, {"dp": 2, "pp": 2})

    def holders(name):
        return {tuple(plan.ranks_of_owner(int(o))) for o in plan.owners[name].reshape(-1)}
    assert holders("w1") == holders("w3") == {(0, 2)}
    assert holders("w4") == holders("w5_grad") == {(1, 3)}
    assert holders("z1") == {(0,), (2,)} and holders("z5") == {(1,), (3,)}


def micro_batch_steps(plan, rank):
    """(phase, micro-batch) of `rank`'s EXECs writing a z, h or a tile, repeats merged."""
    phases, steps = {op.name: op.phase for op in plan.graph.ops()}, []
    for instruction in plan.program(rank):
        if type(instruction) is Exec and phases[instruction.op_name] != "optimizer":
            batches = {key[1][-1] for key in instruction.writes
                       if key[0][0] in "zha" and len(key[1]) == 2}
            step = (phases[instruction.op_name], batches.pop()) if len(batches) == 1 else None
            if step and (not steps or steps[-1] != step):
                steps.append(step)
    return steps


@pytest.mark.parametrize("nranks", [2, 3])
def test_each_stage_walks_micro_batches_in_gpipe_order(nranks):
    """GPipe: on every stage, all of micro-batch 0's forward work, then 1's, ..., then
    the backwards in the same order; op order (the walk without pipelining, as under
    'single') interleaves the micro-batches."""
    plan = mlp_plan(nranks, "pp")
    gpipe = [("forward", mb) for mb in range(5)] + [("backward", mb) for mb in range(5)]
    for rank in range(nranks):
        assert micro_batch_steps(plan, rank) == gpipe, rank
    assert micro_batch_steps(mlp_plan(1, "single"), 0) != gpipe


@pytest.mark.parametrize("nranks", [2, 3])
def test_each_stage_walks_one_forward_one_backward(nranks):
    """1F1B: stage s runs p - 1 - s forwards, then a forward and a backward in turn."""
    plan = mlp_plan(nranks, {"pp": nranks, "schedule": "1f1b"})
    for rank in range(nranks):
        assert micro_batch_steps(plan, rank) == one_f_one_b_steps(rank, nranks, 5), rank
    assert one_f_one_b_steps(0, 3, 4) == [
        ("forward", 0), ("forward", 1), ("forward", 2), ("backward", 0), ("forward", 3),
        ("backward", 1), ("backward", 2), ("backward", 3)]


def test_one_f_one_b_stashes_fewer_micro_batches():
    """Activation-heavy MLP, 16 micro-batches on 4 stages: GPipe stashes all 16 per
    stage, 1F1B at most 4 (stage 0) to 1 (the last), each weight gradient accumulated
    per micro-batch; measured peaks are the planned ones on every rank."""
    model = build_mlp([32] * 9, 128, dtype="fp64")
    tiling = nt.TilingStrategy.manual({"x": [32, 8]})
    peaks = {}
    for schedule in ("gpipe", "1f1b"):
        cg = nt.compile(model.graph, comm=nt.SimulatedWorld(4), tiling=tiling,
                        distribution={"pp": 4, "schedule": schedule})
        rng = np.random.default_rng(0)
        for name, value in model.init_params(rng).items():
            cg.bind_data(name, value)
        cg.bind_data("x", rng.standard_normal((32, 128)))
        cg.bind_data("y", rng.integers(0, 32, 128).astype(np.int64))
        cg.execute()
        for rank in range(4):
            cg.check_stats(rank)
        peaks[schedule] = [cg.memory_on_rank(rank) for rank in range(4)]
    assert all(b < 0.6 * a for a, b in zip(peaks["gpipe"], peaks["1f1b"])), peaks
    assert peaks["1f1b"][0] > peaks["1f1b"][3]


def pp_traffic(plan, mesh, tensors=None) -> int:
    """Bytes sent between ranks of different stages, of `tensors` only if given."""
    shape, pp = tuple(mesh.values()), list(mesh).index("pp")
    return sum(i.nbytes for rank, program in enumerate(plan.programs()) for i in program
               if type(i) is Send and (tensors is None or i.key[0] in tensors)
               and np.unravel_index(rank, shape)[pp] != np.unravel_index(i.peer, shape)[pp])


@pytest.mark.parametrize("mesh", [{"pp": 2}, {"pp": 3}, {"tp": 2, "pp": 2}],
                         ids=lambda m: "x".join(f"{a}{s}" for a, s in m.items()))
def test_traffic_along_pp_is_the_stage_boundaries(mesh):
    """Along pp, each step sends the activations at each stage boundary forward and
    their gradients back: 2 x batch x width x 8 bytes per boundary, nothing else."""
    import mesh_formulas
    nranks = int(np.prod(list(mesh.values())))
    plan = mlp_plan(nranks, mesh)
    args = type("Args", (), {"model": "mlp", "batch": BATCH, "hidden": SIZES[1:-1]})()
    ours = traffic_by_mesh_axis(plan, mesh)
    formula = mesh_formulas.pipeline_boundary_bytes(args, mesh)
    assert ours["pp"] == pp_traffic(plan, mesh) == formula > 0


@pytest.mark.parametrize("mesh", [{"dp": 2, "pp": 2}, {"fsdp": 2, "pp": 2}],
                         ids=lambda m: "x".join(f"{a}{s}" for a, s in m.items()))
def test_traffic_along_pp_with_a_batch_axis(mesh):
    """With dp or fsdp beside pp the boundary activations and gradients still cross pp
    as the formula says; in addition the first layer of a stage has its weight
    gradient summed next to the previous stage's activations (the planner places
    partial sums by the owners' bytes, not by received copies): that layer's output
    gradient goes back and the partial sums come forward, under a third of the total."""
    import mesh_formulas
    sizes, batch = [64, 128, 96, 32, 10], 240
    plan = mlp_plan(4, mesh, sizes=sizes, batch=batch, tiles={"x": [64, 30]})
    args = type("Args", (), {"model": "mlp", "batch": batch, "hidden": sizes[1:-1]})()
    formula = mesh_formulas.pipeline_boundary_bytes(args, mesh)
    assert pp_traffic(plan, mesh, {"a2", "a2_grad"}) == formula
    assert formula < pp_traffic(plan, mesh) < 1.5 * formula


def test_pp_on_one_rank_is_single():
    ours, single = mlp_plan(1, "pp"), mlp_plan(1, "single")
    assert all(np.array_equal(ours.owners[n], single.owners[n]) for n in ours.owners)
    assert sorted(map(str, ours.programs()[0])) == sorted(map(str, single.programs()[0]))


def test_uneven_stages_on_a_mesh():
    """4 layers on 3 stages of a dp x pp x tp mesh: 2 + 1 + 1."""
    plan = mlp_plan(6, {"dp": 2, "pp": 3, "tp": 1}, sizes=SIZES[:5])
    stages = [{int(np.unravel_index(rank, (2, 3, 1))[1])
               for rank in plan.ranks_of_owner(int(plan.owners[f"w{i}"].reshape(-1)[0]))}
              for i in range(1, 5)]
    assert stages == [{0}, {0}, {1}, {2}]


def test_more_stages_than_layers_is_refused():
    model = build_mlp(SIZES[:5], BATCH, dtype="fp64")
    with pytest.raises(ValueError, match=r"graph 'mlp' has 4 layer\(s\) \[1, 2, 3, 4\] "
                                         r"for 5 stages"):
        nt.compile(model.graph, comm=nt.SimulatedWorld(5), distribution="pp",
                   tiling=nt.TilingStrategy.manual(TILES))


@pytest.mark.parametrize("distribution,match", [
    ({"pp": 2, "schedule": "zigzag"}, r"schedule 'zigzag' needs one of \('gpipe', '1f1b'\)"),
    ({"dp": 2, "schedule": "1f1b"}, r"schedule '1f1b' needs .* and a pp axis"),
])
def test_bad_schedules_fail_at_compile(distribution, match):
    model = build_mlp(SIZES, BATCH, dtype="fp64")
    with pytest.raises(ValueError, match=match):
        nt.compile(model.graph, comm=nt.SimulatedWorld(2), distribution=distribution)


def test_a_graph_without_layers_is_refused():
    g = nt.LogicalGraph("flat")
    x = g.tensor([4, 6], "x", dtype="fp64", external=True)
    w = g.tensor([3, 4], "weight", dtype="fp64", requires_grad=True, persistent=True)
    nt.ops.gemm(w, x, "out").mark_output(True)
    with pytest.raises(ValueError, match=r"graph 'flat' has no layer structure.*'h3_out'"):
        nt.compile(g, comm=nt.SimulatedWorld(2), distribution="pp")
