"""Per-rank planning (docs/design.md): each rank's program derived alone
equals that rank's program in the all-ranks plan, for every preset, on worlds of
1-16 ranks (the GPT-2's on 3 of them: planning it alone on every rank of a
world costs as the square of the world) and for dp x tp and fsdp x tp meshes on
4-8 ranks, for an MLP with an optimizer, a tiny GPT-2 and a graph of data-movement
ops with a scalar loss, with uneven tilings; and for pipelines (pp, dp/fsdp/tp x
pp, GPipe and 1F1B).

The oracle is the all-ranks builder (Plan.programs(), what a SimulatedWorld runs):
the union of the per-rank programs must be that plan exactly, instruction for
instruction, and every SEND must meet its RECV (same tile, tag and size) in order.
A rank lowering alone gets groups of TABLE_MIN_STEPS steps or more as StepTables
(plan/step_table.py, decided with numpy in plan/rank_partial.py); these worlds'
groups are short, so the comparisons lower that threshold to 2 (`tables`), and a
subset of worlds runs again with step tuples only. Plain pytest.
"""

from collections import Counter

import pytest

import nntile_spmd as nt
from nntile_spmd import ops
from nntile_spmd.models import build_mlp, gpt2
from nntile_spmd.plan import lowering, rank_groups, rank_partial
from nntile_spmd.plan.instructions import Recv, Send
from nntile_spmd.plan.presets import PRESET_NAMES
from nntile_spmd.train import add_optimizer
from helpers import worlds_and_presets

pytestmark = pytest.mark.mpi_skip   # single-process tier: nothing here runs on MPI
# The small graphs' worlds: every one up to 8 ranks, one as large as the MLP's batch (13)
# and one with more ranks than tiles (16). Worlds 9-12, 14 and 15 reached no line or
# branch of nntile_spmd that these do not (docs/testing.md).
WORLDS = (1, 2, 3, 4, 5, 6, 7, 8, 13, 16)
# The GPT-2's worlds: one rank, uneven shares of its batch of 5 among peers that each
# talk to two others (3), and more ranks than tiles on every axis (16: rank 4 holds the
# last batch row, rank 5 none). The worlds left out (2, 4, 5, 7, ...) reach no line or
# branch of the planner that the module's other tests do not (docs/testing.md: branch
# coverage with and without them); the MLP and the data ops plan more worlds.
GPT2_WORLDS = (1, 3, 16)


def sampled_ranks(nranks):
    """The ranks whose programs are compared in a world of more than 8 ranks (each rank
    planned alone costs about a second of CPU for the GPT-2): the first, the last holder
    of a batch row and the first rank without one (the GPT-2's batch is 5), and the last.
    The ranks 1, 8 and 14 that were compared too reached no line or branch of nntile_spmd
    that these and the module's other tests do not (docs/testing.md). Every rank is
    compared in the smaller worlds."""
    if nranks <= 8:
        return range(nranks)
    return sorted({0, 4, 5, nranks - 1})


def mlp_graph():
    """An MLP (13 samples: no world here divides them evenly) with its Adam step."""
    model = build_mlp((5, 7, 6, 3), 13, dtype="fp64")
    add_optimizer(model.graph, model.params, model.grads, "adam")
    return model.graph, nt.TilingStrategy.manual({"x": [2, 3], "w1": [3, 2]})


def gpt2_graph():
    cfg = gpt2.GPT2Config(vocab_size=29, n_positions=8, n_embd=12, n_layer=1, n_head=3)
    model = gpt2.build_gpt2(cfg, batch=5, seq=7, dtype="fp64")
    return model.graph, nt.TilingStrategy.auto(target_tile_bytes=160)   # uneven tiles


def data_ops_graph():
    """Views, copies, gather/scatter, batch_norm and a scalar loss (0-d tiles)."""
    g = nt.LogicalGraph("data_ops")
    x = g.tensor([6, 4], "x", "fp64", external=True)
    h = ops.scale(x, "h", 2.0)
    ops.scale(ops.reshape(h, "r", [3, 8]), "r3", 3.0).mark_output()
    ops.slice(h, "s", 1, 1, 3).mark_output()
    ops.scatter(ops.gather(x, "whole"), "back").mark_output()
    gamma = g.tensor([6], "gamma", "fp64", requires_grad=True, persistent=True)
    beta = g.tensor([6], "beta", "fp64", requires_grad=True, persistent=True)
    y = ops.batch_norm(x, gamma, beta, "bn", axis=0).mark_output()
    loss = ops.mse_loss(y, g.tensor([6, 4], "target", "fp64", external=True), "loss")
    ops.log_scalar(loss, "loss_value")
    nt.grad(g, loss, [gamma, beta])
    return g, nt.TilingStrategy.explicit({"x": [4, 1], "r": [3, 2], "s": [None, 1]})


GRAPHS = {"mlp": mlp_graph, "gpt2": gpt2_graph, "data_ops": data_ops_graph}


def graph_worlds(worlds, gpt2_worlds):
    """(graph name, world size, preset): WORLDS for the MLP and the data ops, the
    GPT-2's own for it (slow from 7 ranks on: each costs seconds), under every preset
    but on one rank, where every preset plans what `single` does (worlds_and_presets).
    The GPT-2 runs `single` (all on rank 0, nothing elsewhere) on 1 rank only: a larger
    world adds empty programs, which the small graphs check."""
    return [pytest.param(name, nranks, preset,
                         marks=[pytest.mark.slow] * (name == "gpt2" and nranks >= 7))
            for name in sorted(GRAPHS)
            for nranks, preset in worlds_and_presets(gpt2_worlds if name == "gpt2" else worlds,
                                                     PRESET_NAMES)
            if not (name == "gpt2" and preset == "single" and nranks > 1)]


@pytest.fixture
def tables(monkeypatch):
    """Every group of 2 steps or more lowered for one rank comes as a StepTable."""
    monkeypatch.setattr(lowering, "TABLE_MIN_STEPS", 2)


def messages(programs):
    """{(source, target): sorted [(tag, tile, bytes), ...]} of the SENDs and of the RECVs.

    Sorted by tag: MPI matches a message by (source, tag), and a sender posts its
    SENDs as soon as each tile version exists, not in its peer's receive order.
    """
    sends, recvs = {}, {}
    for rank, program in enumerate(programs):
        for instruction in program:
            if type(instruction) is Send:
                sends.setdefault((rank, instruction.peer), []).append(
                    (instruction.tag, instruction.key, instruction.nbytes))
            elif type(instruction) is Recv:
                recvs.setdefault((instruction.peer, rank), []).append(
                    (instruction.tag, instruction.key, instruction.nbytes))
    for pairs in (sends, recvs):
        for pair, listed in pairs.items():
            tags = [tag for tag, _, _ in listed]
            assert len(set(tags)) == len(tags), f"{pair}: a tag is used twice"
            listed.sort()
    return sends, recvs


def rank_plans(graph, nranks, tiling, preset, ranks=None):
    """{rank: program} for every rank (or those given), each from a plan of that rank
    (which derives it alone)."""
    programs = {}
    for rank in range(nranks) if ranks is None else ranks:
        plan = nt.build_plan(graph, nranks, tiling, preset, rank=rank)
        programs[rank] = plan.program(rank)
        assert not plan._programs, "a rank's plan built the all-ranks programs"
    return programs


# The worlds whose ranks are derived step by step as well (every group a tuple of steps):
# that walk is the same for any world, so one rank and uneven shares of the batch and
# sequence (the GPT-2's 1 and 3 ranks; for the small graphs 1-3, 7 and 16 ranks).
STEP_BY_STEP_WORLDS = {"gpt2": (1, 3), "mlp": (1, 2, 3, 7, 16), "data_ops": (1, 2, 3, 7, 16)}


@pytest.mark.parametrize("graph_name,nranks,preset", graph_worlds(WORLDS, GPT2_WORLDS))
def test_union_of_rank_programs_is_the_all_ranks_plan(graph_name, nranks, preset, monkeypatch):
    """Each rank derived alone with StepTables from 2 steps (and in STEP_BY_STEP_WORLDS
    also step by step) equals the all-ranks plan, built once for both walks."""
    graph, tiling = GRAPHS[graph_name]()
    ranks = sampled_ranks(nranks) if graph_name == "gpt2" else None
    oracle = nt.build_plan(graph, nranks, tiling, preset).programs()
    for min_steps in (2, 10**9) if nranks in STEP_BY_STEP_WORLDS[graph_name] else (2,):
        monkeypatch.setattr(lowering, "TABLE_MIN_STEPS", min_steps)
        sends = derived_equal_the_oracle(graph, nranks, tiling, preset, ranks, oracle)
        if nranks > 1 and preset != "single":
            assert sends, "no message at all: the comparison would prove little"


def derived_equal_the_oracle(graph, nranks, tiling, distribution, ranks=None, oracle=None):
    """Each rank's program derived alone (every rank, or those given) equals the
    all-ranks plan's (`oracle`: its programs, built here when not given), and every
    SEND meets its RECV; returns the SENDs by (source, target)."""
    if oracle is None:
        oracle = nt.build_plan(graph, nranks, tiling, distribution).programs()
    derived = rank_plans(graph, nranks, tiling, distribution, ranks)
    for rank, program in derived.items():
        assert program == oracle[rank], f"rank {rank} of {distribution} differs"
    sends, recvs = messages([oracle[rank] for rank in range(nranks)])
    assert sends == recvs
    return sends


MESH_WORLDS = [({"dp": 2, "tp": 2}, 4), ({"fsdp": 2, "tp": 2}, 4), ({"tp": 2, "dp": 2}, 4),
               ({"dp": 3, "tp": 2}, 6), ({"fsdp": 2, "tp": 3}, 6), ({"fsdp": 4, "tp": 2}, 8)]
# the axes in the other order (tp outer) change only which rank sits where, which the
# MLP and the data ops check; the GPT-2 plans it once, in the first order
MESH_CASES = [(name, mesh, nranks) for name in sorted(GRAPHS) for mesh, nranks in MESH_WORLDS
              if not (name == "gpt2" and next(iter(mesh)) == "tp")]


def test_hsdp_too(tables):
    """HSDP's owners (a shard held by an fsdp index on every dp row) plan alike alone
    (the MLP: its GPT-2 run costs a minute for the same rule)."""
    graph, tiling = GRAPHS["mlp"]()
    assert derived_equal_the_oracle(graph, 6, tiling, {"dp": 2, "fsdp": 3})


def mesh_sampled_ranks(mesh, nranks):
    """The ranks compared in a GPT-2 mesh of more than 4 ranks (planning each alone is
    this test's cost): the first row along the last, innermost axis (every position on
    it) and the last rank (the last position on every axis). Every rank is compared in
    the 2 x 2 meshes and for the small graphs."""
    if nranks <= 4:
        return None
    return sorted(set(range(list(mesh.values())[-1])) | {nranks - 1})


@pytest.mark.parametrize("graph_name,mesh,nranks", MESH_CASES, ids=str)
def test_meshes_too(graph_name, mesh, nranks, tables):
    """Mesh group owners (a tile held by a tp column or a dp row) plan alike alone."""
    graph, tiling = GRAPHS[graph_name]()
    ranks = mesh_sampled_ranks(mesh, nranks) if graph_name == "gpt2" else None
    assert derived_equal_the_oracle(graph, nranks, tiling, mesh, ranks)


# meshes whose ranks are derived step by step too (every group a tuple of steps): the
# short groups a mesh rank decides by class of alike groups (plan/rank_groups.py)
STEP_BY_STEP_MESHES = [("gpt2", {"dp": 2, "tp": 2}, 4), ("mlp", {"fsdp": 2, "tp": 3}, 6),
                       ("data_ops", {"dp": 3, "tp": 2}, 6)]


@pytest.mark.parametrize("graph_name,mesh,nranks", STEP_BY_STEP_MESHES, ids=str)
def test_meshes_step_by_step(graph_name, mesh, nranks, monkeypatch):
    """Short groups on a mesh, decided once per class of alike groups of an op, plan
    alike alone; some classes hold several groups, and each group's own partial_choice
    is its class's decision."""
    monkeypatch.setattr(lowering, "TABLE_MIN_STEPS", 10**9)
    classed = Counter()
    real = rank_groups.ShortGroups.group_facts
    real_add = rank_groups.ShortGroups.add_classed_group

    def checking(self, group, index, facts, decided):
        known = decided.get(facts.classes[index], ())
        if known != ():
            choice = self.partial_choice(group)
            assert known == (None if choice is None else tuple(choice.step_ranks)), group.outputs
            classed["checked"] += 1
        return real_add(self, group, index, facts, decided)
    monkeypatch.setattr(rank_groups.ShortGroups, "add_classed_group", checking)

    def counting(self, groups, arrays):
        facts = real(self, groups, arrays)
        taking = facts.classes[facts.classes >= 0]
        classed["groups"] += len(taking)
        classed["classes"] += len(set(taking.tolist()))
        return facts
    monkeypatch.setattr(rank_groups.ShortGroups, "group_facts", counting)
    graph, tiling = GRAPHS[graph_name]()
    assert derived_equal_the_oracle(graph, nranks, tiling, mesh)
    assert classed["groups"] > classed["classes"] > 0 and classed["checked"], classed


def test_every_preset_is_covered():
    assert set(PRESET_NAMES) == {"single", "ddp", "fsdp", "tp"}


def test_one_phase_alone_matches_too():
    graph, tiling = mlp_graph()
    oracle = nt.build_plan(graph, 3, tiling, "fsdp").programs("forward")
    for rank in range(3):
        plan = nt.build_plan(graph, 3, tiling, "fsdp", rank=rank)
        assert plan.program(rank, "forward") == oracle[rank]
        assert plan.program(rank, "forward") != plan.program(rank)


def test_a_mismatch_would_be_seen():
    """The oracle comparison is not vacuous: another rank's program differs."""
    graph, tiling = gpt2_graph()
    derived = rank_plans(graph, 3, tiling, "ddp")
    assert derived[0] != derived[1]
    counts = Counter(type(i).__name__ for i in derived[1])
    assert counts["Send"] and counts["Recv"] and counts["Exec"] and counts["Free"]


def gpt2_layers_graph():
    """A tiny GPT-2 with 3 blocks: 2 + 1 on two stages, one each on three."""
    cfg = gpt2.GPT2Config(vocab_size=29, n_positions=8, n_embd=12, n_layer=3, n_head=3)
    model = gpt2.build_gpt2(cfg, batch=5, seq=7, dtype="fp64")
    return model.graph, nt.TilingStrategy.manual({"h_in": [5, 4, 2]})   # uneven tiles


PIPELINE_WORLDS = [("pp", 2), ("pp", 3), ({"dp": 2, "pp": 2}, 4), ({"pp": 2, "fsdp": 2}, 4),
                   ({"fsdp": 2, "tp": 2, "pp": 2}, 8), ({"pp": 3, "schedule": "1f1b"}, 3),
                   ({"dp": 2, "pp": 2, "schedule": "1f1b"}, 4)]


@pytest.mark.parametrize("distribution,nranks", PIPELINE_WORLDS, ids=lambda v: str(v))
@pytest.mark.parametrize("graph_name", ["mlp", "gpt2"])
def test_pipelines_too(graph_name, distribution, nranks, tables):
    """The micro-batch-major walks of pp (GPipe, 1F1B: plan/pipeline.py) derive a
    rank's program alone too: a tied weight's gradient summed on the last stage into
    the first stage's tile (a tree root outside the tile's owners, partial sums split
    per micro-batch under 1F1B) included."""
    graph, tiling = {"mlp": mlp_graph, "gpt2": gpt2_layers_graph}[graph_name]()
    assert derived_equal_the_oracle(graph, nranks, tiling, distribution)


def test_a_rank_lowers_only_its_share_of_the_groups(monkeypatch):
    """With the batch growing with the world (a fixed amount of work per rank), a rank
    that owns no parameter tile lowers as many task groups on 8 ranks as on 32, while
    the all-ranks plan lowers 4x as many (a parameter's owner sends it to every rank,
    so its share does grow)."""
    import nntile_spmd.plan.plan as plan_module
    lowered = []
    real_lower_op = plan_module.lower_op

    def counting_lower_op(*args, **kwargs):
        groups = real_lower_op(*args, **kwargs)
        lowered.append(len(groups))
        return groups
    monkeypatch.setattr(plan_module, "lower_op", counting_lower_op)
    mine, every = {}, {}
    for nranks in (8, 32):
        model = build_mlp((5, 7, 6, 3), 2 * nranks, dtype="fp64")
        tiling = nt.TilingStrategy.manual({"x": [5, 2]})
        rank = nranks - 1
        plan = nt.build_plan(model.graph, nranks, tiling, "fsdp", rank=rank)
        assert all(plan.owner_of((param.name, coord)) != rank for param in model.params
                   for coord in plan.tilings[param.name].coords())
        lowered.clear()
        plan.program(rank)
        mine[nranks] = sum(lowered)
        lowered.clear()
        nt.build_plan(model.graph, nranks, tiling, "fsdp").programs()
        every[nranks] = sum(lowered)
    assert mine[32] == mine[8], mine
    assert every[32] > 3 * every[8], every


def test_tables_take_both_ways(tables, monkeypatch):
    """The oracle worlds do walk StepTable groups: each as partial sums (this rank's tree
    merges found by position) and as owner computes, and a mesh decides mesh-owned
    inputs by step signature (rank 0 of each world walks them all)."""
    walked = Counter()
    for name in ("table_partial", "table_owner_computes", "my_merges", "step_arrays"):
        real = getattr(rank_partial.TableSteps, name)

        def counting(self, *args, _real=real, _name=name):
            result = _real(self, *args)
            walked[_name] += 1
            if _name == "step_arrays" and result.by_signature:
                walked["mesh"] += 1
            return result
        monkeypatch.setattr(rank_partial.TableSteps, name, counting)
    graph, tiling = gpt2_graph()
    for distribution, nranks in (("fsdp", 4), ("ddp", 3), ({"dp": 2, "tp": 2}, 4)):
        walked.clear()
        rank_plans(graph, nranks, tiling, distribution, ranks=(0,))
        kinds = ("table_partial", "table_owner_computes", "my_merges", "step_arrays") + (
            ("mesh",) if isinstance(distribution, dict) else ())
        assert all(walked[name] for name in kinds), (distribution, walked)


def test_a_tile_everyone_holds_is_not_lowered_again(monkeypatch):
    """The bool causal mask's owner (attention_mask="tensor") sends it to every rank in
    the first block; in the next blocks every rank holds it, so the owner lowers only
    its own tiles of them."""
    import nntile_spmd.plan.plan as plan_module
    cfg = gpt2.GPT2Config(vocab_size=29, n_positions=8, n_embd=12, n_layer=2, n_head=3)
    graph = gpt2.build_gpt2(cfg, batch=8, seq=7, dtype="fp64",
                             attention_mask="tensor").graph
    tiling = nt.TilingStrategy.constrained({"causal_mask": [7, 7], "input_ids": [7, 1]},
                                           target_tile_bytes=4096)
    plan = nt.build_plan(graph, 8, tiling, "fsdp", rank=0)
    assert plan.owner_of(("causal_mask", (0, 0))) == 0
    lowered = []
    real_lower_op = plan_module.lower_op

    def counting_lower_op(op, *args):
        groups = real_lower_op(op, *args)
        lowered.append((op.op_type, len(groups)))
        return groups
    monkeypatch.setattr(plan_module, "lower_op", counting_lower_op)
    plan.program(0)
    masks = [count for op_type, count in lowered if op_type == "mask_scalar"]
    assert masks[0] == 8 and masks[1:] == [1] * (len(masks) - 1), masks
    assert plan.program(0) == nt.build_plan(graph, 8, tiling, "fsdp").programs()[0]


def gpt2_batch_of_one_graph():
    """What Generator(batch=1) plans for its prompt: one sequence, so fewer batch tiles
    than ranks under ddp and fsdp, and its scalar loss one step over one tile."""
    cfg = gpt2.GPT2Config(vocab_size=29, n_positions=8, n_embd=12, n_layer=1, n_head=3)
    return gpt2.build_gpt2(cfg, batch=1, seq=3, dtype="fp64").graph, nt.TilingStrategy.auto()


def data_ops_one_tile_graph():
    """The data ops with every tensor one tile: 0-d masks over the scalar loss's grid,
    reached in one step from a one-tile input, on a rank that owns it and on ranks that
    own nothing."""
    graph, _ = data_ops_graph()
    return graph, nt.TilingStrategy.explicit({"x": [6, 4], "r": [3, 8], "s": [None, 4]})


SHAPE_CLASSES = {"gpt2_batch_of_one": gpt2_batch_of_one_graph,
                 "data_ops_one_tile": data_ops_one_tile_graph}


@pytest.mark.parametrize("preset", ["ddp", "fsdp", "tp"])
@pytest.mark.parametrize("nranks", [2, 3])
@pytest.mark.parametrize("graph_name", sorted(SHAPE_CLASSES))
def test_one_tile_and_fewer_tiles_than_ranks(graph_name, nranks, preset, tables):
    """A rank planned alone where a tensor has one tile (a scalar's 0-d grid among them)
    and the batch has fewer tiles than the world has ranks (real MPI's path; the all-ranks
    plan, what a SimulatedWorld runs, never took it: a 0-d mask crashed here)."""
    graph, tiling = SHAPE_CLASSES[graph_name]()
    derived_equal_the_oracle(graph, nranks, tiling, preset)
