"""Bounded fan-in and fan-out of a task group (plan/partial.py): on more
ranks than FAN_LIMIT, the owner of a weight tile that every batch tile reads neither
fetches an input from every rank (its gradient is reduced in a tree) nor runs every
rank's partial step next to its tile; and the per-rank builder still derives exactly
the all-ranks plan where these rules decide. Plain pytest, small shapes.
"""

import math
from collections import Counter

import numpy as np
import pytest

import nntile_spmd as nt
from nntile_spmd.models import gpt2
from nntile_spmd.plan import lowering
from nntile_spmd.plan.instructions import Exec, Recv, Send
from nntile_spmd.plan.partial import FAN_LIMIT
from test_plan_rank import derived_equal_the_oracle

pytestmark = pytest.mark.mpi_skip
NRANKS = FAN_LIMIT + 2   # one sequence per rank: an owner lacks more tiles than the limit


def wide_model():
    """A tiny GPT-2 with one sequence per rank, its vocabulary in 2 tiles (ranks 0, 1)."""
    cfg = gpt2.GPT2Config(vocab_size=32, n_positions=4, n_embd=8, n_layer=1, n_head=2)
    model = gpt2.build_gpt2(cfg, batch=NRANKS, seq=4, dtype="fp64")
    tiling = nt.TilingStrategy.constrained({"input_ids": [4, 1], "wte": [8, 16]},
                                           target_tile_bytes=1 << 20)
    return model, tiling


def wide_gpt2():
    model, tiling = wide_model()
    return model.graph, tiling


def ops_of(program, kind):
    return Counter(instruction.consumer if kind is Recv else instruction.op_name
                   for instruction in program if type(instruction) is kind)


def test_a_vocabulary_tile_owner_does_not_work_for_every_rank():
    graph, tiling = wide_gpt2()
    program = nt.build_plan(graph, NRANKS, tiling, "fsdp", rank=0).program(0)
    receives, executes = ops_of(program, Recv), ops_of(program, Exec)
    embedding = next(name for name in executes if name.startswith("embedding_backward"))
    # a tree: log2(NRANKS) rounded up merges, not one fetch per batch tile
    assert receives[embedding] <= 4 and executes[embedding] <= 1 + 4, (receives, executes)
    assert max(receives.values()) < NRANKS - 1, receives
    assert max(executes.values()) < NRANKS, executes


@pytest.mark.parametrize("preset,table_min_steps", [("fsdp", 2), ("fsdp", 10**9),
                                                    ("ddp", 2)])
def test_the_rank_builder_agrees_where_the_limit_decides(preset, table_min_steps,
                                                         monkeypatch):
    """Decided with numpy over StepTables (2) and step by step (10**9) alike."""
    monkeypatch.setattr(lowering, "TABLE_MIN_STEPS", table_min_steps)
    graph, tiling = wide_gpt2()
    assert derived_equal_the_oracle(graph, NRANKS, tiling, preset)


def test_a_weight_tile_reaches_its_readers_down_a_tree():
    """No rank sends one tile more than ceil(log2 N) times for one op (a binomial
    tree), where its owner sent it to each of N - 1 readers."""
    graph, tiling = wide_gpt2()
    programs = nt.build_plan(graph, NRANKS, tiling, "fsdp").programs()
    sends = Counter((rank, instruction.key, instruction.consumer)
                    for rank, program in enumerate(programs) for instruction in program
                    if type(instruction) is Send and not instruction.key[0].endswith("grad"))
    assert max(sends.values()) <= math.ceil(math.log2(NRANKS)), sends.most_common(3)
    assert any(key[0] == "wte" for _, key, _ in sends)


def run_step(ranks, preset, deterministic):
    """Loss and gradients of one step of wide_gpt2 on simulated ranks."""
    model, tiling = wide_model()
    cg = nt.compile(model.graph, comm=nt.SimulatedWorld(ranks), distribution=preset,
                    tiling=tiling, deterministic=deterministic)
    rng = np.random.default_rng(0)
    for name, value in model.init_params(rng).items():   # biases and norms not 0 or 1
        noise = rng.normal(0, 0.1, value.shape) if value.dtype.kind == "f" else 0
        cg.bind_data(name, value + noise)
    cg.bind_data("input_ids", rng.integers(0, 32, (4, NRANKS)))
    cg.bind_data("targets", rng.integers(0, 32, (4, NRANKS)))
    cg.execute()
    return {name: cg.get_output(name) for name in ["loss"] + [t.name for t in model.grads]}


@pytest.mark.parametrize("deterministic", [True, False])
def test_trees_and_bounded_fan_in_give_one_rank_s_results(deterministic):
    """Bitwise in deterministic mode (the trees only move tiles), to rounding else
    (partial sums add in another order)."""
    many, one = run_step(NRANKS, "fsdp", deterministic), run_step(1, "single", deterministic)
    assert len(many) > 10
    for name, value in many.items():
        if deterministic:
            assert np.array_equal(value, one[name]), name
        else:
            np.testing.assert_allclose(value, one[name], rtol=1e-10, atol=1e-12,
                                       err_msg=name)


MESH = {"fsdp": NRANKS // 2, "tp": 2}   # a tp row of 2, its columns gather fsdp shards


def test_the_tp_axis_is_cut_over_its_own_ranks():
    """A mesh's tp axis blocks the hidden axes over its t ranks: t tiles, not one per
    rank of the world (which made a weight's tiles and tasks per rank grow with N)."""
    graph, _ = wide_gpt2()
    plan = nt.build_plan(graph, NRANKS, None, MESH, rank=0)
    assert plan.tilings["h0_fc_weight"].grid[0] == 2, plan.tilings["h0_fc_weight"]
    assert plan.tilings["input_ids"].grid[1] == NRANKS // 2   # a batch tile per row


def test_the_rank_builder_agrees_where_columns_decide(monkeypatch):
    """fsdp shards counted on their tp column (partial.py), over StepTables too."""
    monkeypatch.setattr(lowering, "TABLE_MIN_STEPS", 2)
    graph, tiling = wide_gpt2()
    assert derived_equal_the_oracle(graph, NRANKS, tiling, MESH)


def test_a_vocabulary_parallel_embedding_stays_in_its_row():
    """The embedding's partial sums (its vocabulary in 16 tiles on more than FAN_LIMIT
    ranks: a tree decides) run on each row's rank of the vocabulary tile's column and
    the row reduces them: no rank fetches another row's activations or a vocabulary
    tile of another column for it."""
    graph, _ = wide_gpt2()
    tiling = nt.TilingStrategy.constrained({"input_ids": [4, 1], "wte": [8, 2]},
                                           target_tile_bytes=1 << 20)
    programs = nt.build_plan(graph, NRANKS, tiling, MESH).programs()
    checked = 0
    for rank, program in enumerate(programs):
        for instruction in program:
            if type(instruction) is not Recv:
                continue
            name, peer = instruction.key[0], instruction.peer
            if name == "wte":
                assert peer % 2 == rank % 2, (rank, instruction)   # its column
            elif name.startswith(("token_embeddings~", "input_ids")):
                assert peer // 2 == rank // 2, (rank, instruction)   # its row
            checked += 1
    assert checked


@pytest.mark.slow   # ten simulated ranks of a mesh (the 2-4-rank mesh tests run unmarked)
def test_a_mesh_gives_one_rank_s_results():
    many, one = run_step(NRANKS, MESH, False), run_step(1, "single", False)
    for name, value in many.items():
        np.testing.assert_allclose(value, one[name], rtol=1e-10, atol=1e-12, err_msg=name)


def test_a_weight_read_by_several_ops_is_gathered_once_per_phase():
    """wte, read by the embedding and the logits gemm (forward) and by the logits'
    input gradient (backward), three trees of more than FAN_LIMIT readers, reaches each
    rank once per phase, as ZeRO-3 gathers a weight once for each pass: the logits
    gemm's tree leaves out the ranks still holding the embedding's copy."""
    graph, tiling = wide_gpt2()
    plan = nt.build_plan(graph, NRANKS, tiling, "fsdp")
    phase = {op.name: op.phase for op in plan.live_ops()}
    readers = Counter(op.phase for op in plan.live_ops()
                      if "wte" in {tensor.name for tensor in op.inputs})
    assert readers["forward"] >= 2 and readers["backward"] >= 1, readers
    receives = Counter((rank, instruction.key, phase[instruction.consumer])
                       for rank, program in enumerate(plan.programs())
                       for instruction in program
                       if type(instruction) is Recv and instruction.key[0] == "wte")
    assert receives and max(receives.values()) == 1, receives.most_common(3)
    assert {key[2] for key in receives} == {"forward", "backward"}


def test_a_shard_read_across_the_phases_seam_is_gathered_once():
    """On fsdp x tp with more than FAN_LIMIT rows (trees down each column), wte is read
    by the logits gemm at the forward's end and by the logits' input gradient at the
    backward's start, no other tree between: each column's rank receives each of its
    tiles once in the step, not once per phase (the fsdp preset's whole-matrix copies
    still go once per phase: the test above); ranks planning alone agree."""
    graph, tiling = wide_gpt2()
    mesh, nranks = {"fsdp": NRANKS, "tp": 2}, 2 * NRANKS
    plan = nt.build_plan(graph, nranks, tiling, mesh)
    receives = Counter((rank, instruction.key)
                       for rank, program in enumerate(plan.programs())
                       for instruction in program
                       if type(instruction) is Recv and instruction.key[0] == "wte")
    assert receives and max(receives.values()) == 1, receives.most_common(3)
    assert derived_equal_the_oracle(graph, nranks, tiling, mesh, [0, 3, nranks - 1],
                                    plan.programs())


@pytest.mark.parametrize("table_min_steps", [None, 2], ids=["short", "tables"])
def test_a_dp_column_s_weight_is_read_where_it_is_held(table_min_steps, monkeypatch):
    """On dp x tp with more than FAN_LIMIT rows, a vocabulary tile that every row reads
    is held by its tp column, which meets every row: the embedding's steps run on each
    row's rank of the tile's column (Megatron's vocabulary-parallel embedding), not all
    on the row's first rank, so no rank sends a tile of wte; ranks planning alone agree
    (short groups by class, or StepTables)."""
    if table_min_steps is not None:
        monkeypatch.setattr(lowering, "TABLE_MIN_STEPS", table_min_steps)
    graph, tiling = wide_gpt2()
    mesh, nranks = {"dp": NRANKS, "tp": 2}, 2 * NRANKS
    plan = nt.build_plan(graph, nranks, tiling, mesh)
    sent = [send for program in plan.programs() for send in program
            if type(send) is Send and send.key[0] == "wte"]
    assert not sent, sent[:3]
    assert derived_equal_the_oracle(graph, nranks, tiling, mesh, [0, 3, nranks - 1],
                                    plan.programs())
