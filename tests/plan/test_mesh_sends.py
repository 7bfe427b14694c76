"""A tp mesh's messages (plan/accumulate.py, PartialSums.sender_of): the attention
input's gradient, summed by three gemms (q, k and v), is reduced across a tp row once,
as Megatron's one all-reduce; and a tile a mesh group holds goes to each reader from
the member sender_of names, so the group's members share its readers. The tiny GPT-2 of
test_plan_rank.py on a 3 x 2 dp x tp mesh; the per-rank plans equal the all-ranks
ones on such meshes (test_plan_rank.py), and results are checked against one rank in
tests/models/test_gpt2_mesh.py. Plain pytest.
"""

from collections import Counter

import pytest

import nntile_spmd as nt
from nntile_spmd.models import gpt2
from nntile_spmd.plan.accumulate import accumulation_chains
from nntile_spmd.plan.distribution import REPLICATED
from nntile_spmd.plan import lowering
from nntile_spmd.plan.instructions import Exec, Recv, Send

pytestmark = pytest.mark.mpi_skip   # single-process tier
MESH, RANKS = {"dp": 3, "tp": 2}, 6   # on 2 x 2 every reader's sender is a first member
DX = "h0_ln_1_out_grad"   # the attention input's gradient: dX += Wq^T dq + Wk^T dk + Wv^T dv


def tiny_gpt2():
    cfg = gpt2.GPT2Config(vocab_size=29, n_positions=8, n_embd=12, n_layer=1, n_head=3)
    return gpt2.build_gpt2(cfg, batch=5, seq=7, dtype="fp64").graph


@pytest.fixture(scope="module")
def plans():
    """The all-ranks plan of the tiny GPT-2 on dp x tp, and its deterministic one."""
    graph, tiling = tiny_gpt2(), nt.TilingStrategy.auto(target_tile_bytes=160)
    return (nt.build_plan(graph, RANKS, tiling, MESH),
            nt.build_plan(graph, RANKS, tiling, MESH, deterministic=True))


def merges_per_tile(plan, name):
    """How often a partial sum is merged into each tile of `name` (all ranks)."""
    counts = Counter()
    for program in plan.programs():
        for instruction in program:
            if type(instruction) is Exec and instruction.kernel == "add" and \
                    instruction.writes[0][0] == name and instruction.reads[0][0] != name:
                counts[instruction.writes[0]] += 1
    return counts


def test_q_k_and_v_partials_are_reduced_once(plans):
    """Each tile of dX gets one merge across its row's 2 tp ranks, not one per gemm,
    and the three gemms form the chain that carries the partials."""
    plan, deterministic = plans
    writers = [op.name for op in plan.live_ops() if op.outputs[0].name == DX and
               op.op_type == "gemm"]
    assert len(writers) == 3, writers
    chains = accumulation_chains(plan.live_ops())
    assert [chains.get(name) for name in writers] == writers[1:] + [None], chains
    merges = merges_per_tile(plan, DX)
    assert merges and max(merges.values()) == 1, merges
    assert not merges_per_tile(deterministic, DX)   # tile order: no partial sums at all


def test_a_group_tile_goes_out_from_the_reader_s_member(plans):
    """Every send of a mesh group's tile to a rank outside the group leaves from
    sender_of's member, and some leave from a member other than the group's first."""
    plan, _ = plans
    senders = Counter()
    for rank, program in enumerate(plan.programs()):
        for send in (i for i in program if type(i) is Send and i.key[0] in plan.owners):
            code = plan.owner_of(send.key)
            members = plan.ranks_of_owner(code)
            if code < REPLICATED and send.peer not in members:
                inner = send.peer // (members[1] - members[0]) % len(members)
                assert rank == members[inner], (send, members)   # the reader's row/column
                senders[rank == members[0]] += 1
    assert senders[True] and senders[False], senders


def test_a_single_rank_s_tile_is_reduced_once():
    """wte_grad's tiles, each owned by one rank, are added into by the logits gemm and
    by the embedding's backward, both summed over the batch tiles of a column's rows:
    the second op adds into the first's partials and the column reduces them once
    (2 merges per tile over 3 fsdp rows, not 4), and each rank planning alone, the
    carried partial's holders included, derives the all-ranks program."""
    graph, tiling = tiny_gpt2(), nt.TilingStrategy.auto(target_tile_bytes=160)
    mesh, nranks = {"fsdp": 3, "tp": 2}, 6
    plan = nt.build_plan(graph, nranks, tiling, mesh)
    assert (plan.owners["wte_grad"] >= 0).all()   # single ranks, not mesh groups
    writers = [op.name for op in plan.live_ops() if op.outputs[0].name == "wte_grad"]
    assert accumulation_chains(plan.live_ops()).get(writers[0]) == writers[1], writers
    merges = merges_per_tile(plan, "wte_grad")
    assert merges and set(merges.values()) == {2}, merges
    oracle = plan.programs()
    for rank in range(nranks):
        alone = nt.build_plan(graph, nranks, tiling, mesh, rank=rank)
        assert alone.program(rank) == oracle[rank], f"rank {rank} differs"


def embedding_gpt2():
    """A GPT-2 whose embedding gradient, on a 3 x 2 dp x tp mesh, its column's owners
    would sum from every row's sequence gradient (fetching 2 rows' tiles) rather than
    reduce partials of their own, were the logits gemm's partials not carried to it:
    a vocabulary of many tiles per column, and a longer sequence."""
    cfg = gpt2.GPT2Config(vocab_size=101, n_positions=16, n_embd=12, n_layer=1, n_head=3)
    graph = gpt2.build_gpt2(cfg, batch=3, seq=16, dtype="fp64").graph
    return graph, nt.TilingStrategy.auto(target_tile_bytes=400)


@pytest.mark.parametrize("table_min_steps", [None, 2], ids=["short", "tables"])
def test_dp_x_tp_embedding_gradient_stays_in_its_row(table_min_steps, monkeypatch):
    """The embedding's backward adds each row's sequence gradient into the partials of
    wte_grad the logits gemm left on the row's rank of the column (Megatron: one
    all-reduce along dp), so no sequence gradient goes to another row; ranks planning
    alone (short groups by class, or StepTables) derive the all-ranks programs."""
    if table_min_steps is not None:
        monkeypatch.setattr(lowering, "TABLE_MIN_STEPS", table_min_steps)
    graph, tiling = embedding_gpt2()
    plan = nt.build_plan(graph, RANKS, tiling, MESH)
    oracle = plan.programs()
    crossing = [(rank, send) for rank, program in enumerate(oracle) for send in program
                if type(send) is Send and send.key[0] == "token_embeddings_grad" and
                send.peer not in plan.ranks_of_owner(plan.owner_of(send.key))]
    assert not crossing, crossing[:3]
    assert set(merges_per_tile(plan, "wte_grad").values()) == {MESH["dp"] - 1}
    for rank in range(RANKS):
        alone = nt.build_plan(graph, RANKS, tiling, MESH, rank=rank)
        assert alone.program(rank) == oracle[rank], f"rank {rank} differs"


def test_a_replicated_gradient_s_roots_differ_from_tile_to_tile():
    """wpe_grad, replicated, is summed on each dp row's first rank and broadcast to all
    from the root of its reduction, drawn per tile among those ranks: the roots (the
    ranks that receive no reduced copy of the tile) are not one rank for every tile, so
    rank 0 does not send log2(N) copies of every tile."""
    graph, tiling = embedding_gpt2()
    plan = nt.build_plan(graph, RANKS, tiling, MESH)
    receivers = {}
    for rank, program in enumerate(plan.programs()):
        for recv in (i for i in program if type(i) is Recv and i.key[0] == "wpe_grad"):
            receivers.setdefault(recv.key, set()).add(rank)
    assert len(receivers) > 1, receivers
    roots = [set(range(RANKS)) - ranks for ranks in receivers.values()]
    assert all(len(root) == 1 for root in roots), roots
    assert len(set.union(*roots)) > 1, roots
