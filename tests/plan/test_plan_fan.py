"""Bounded fan-in and fan-out of a task group (plan/partial.py, issue 30): on more
ranks than FAN_LIMIT, the owner of a weight tile that every batch tile reads neither
fetches an input from every rank (its gradient is reduced in a tree) nor runs every
rank's partial step next to its tile; and the per-rank builder still derives exactly
the all-ranks plan where these rules decide. Plain pytest, small shapes.
"""

from collections import Counter

import pytest

import nntile_spmd as nt
from nntile_spmd.models import gpt2
from nntile_spmd.plan import lowering
from nntile_spmd.plan.instructions import Exec, Recv
from nntile_spmd.plan.partial import FAN_LIMIT
from test_plan_rank import messages, rank_plans

pytestmark = pytest.mark.mpi_skip
NRANKS = FAN_LIMIT + 2   # one sequence per rank: an owner lacks more tiles than the limit


def wide_gpt2():
    """A tiny GPT-2 with one sequence per rank, its vocabulary in 2 tiles (ranks 0, 1)."""
    cfg = gpt2.GPT2Config(vocab_size=32, n_positions=4, n_embd=8, n_layer=1, n_head=2)
    model = gpt2.build_gpt2(cfg, batch=NRANKS, seq=4, dtype="fp64")
    tiling = nt.TilingStrategy.constrained({"input_ids": [4, 1], "wte": [8, 16]},
                                           target_tile_bytes=1 << 20)
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
    oracle = nt.build_plan(graph, NRANKS, tiling, preset).programs()
    derived = rank_plans(graph, NRANKS, tiling, preset)
    for rank in range(NRANKS):
        assert derived[rank] == oracle[rank], f"rank {rank} of {NRANKS} differs"
    sends, recvs = messages(derived)
    assert sends == recvs and sends
