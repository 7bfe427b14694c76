"""Per-rank planning (DESIGN.md section 4.3): each rank's program derived alone
equals that rank's program in the all-ranks plan, for every preset, on worlds of
1-16 ranks and for dp x tp and fsdp x tp meshes on 4-8 ranks, for an MLP with an
optimizer and a tiny GPT-2, with uneven tilings.

The oracle is the all-ranks builder (Plan.programs(), what a SimulatedWorld runs):
the union of the per-rank programs must be that plan exactly, instruction for
instruction, and every SEND must meet its RECV (same tile, tag and size) in order.
Plain pytest.
"""

from collections import Counter

import pytest

import nntile_spmd as nt
from nntile_spmd.models import build_mlp, gpt2
from nntile_spmd.plan.instructions import Recv, Send
from nntile_spmd.plan.presets import PRESET_NAMES
from nntile_spmd.train.optim import add_optimizer

pytestmark = pytest.mark.mpi_skip   # single-process tier: nothing here runs on MPI
WORLDS = (1, 2, 3, 4, 5, 7, 8, 13, 16)


def mlp_graph():
    """An MLP (13 samples: no world here divides them evenly) with its Adam step."""
    model = build_mlp((5, 7, 6, 3), 13, dtype="fp64")
    add_optimizer(model.graph, model.params, model.grads, "adam")
    return model.graph, nt.TilingStrategy.manual({"x": [2, 3], "w1": [3, 2]})


def gpt2_graph():
    cfg = gpt2.GPT2Config(vocab_size=29, n_positions=8, n_embd=12, n_layer=1, n_head=3)
    model = gpt2.build_gpt2(cfg, batch=5, seq=7, dtype="fp64")
    return model.graph, nt.TilingStrategy.auto(target_tile_bytes=160)   # uneven tiles


GRAPHS = {"mlp": mlp_graph, "gpt2": gpt2_graph}


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


def rank_plans(graph, nranks, tiling, preset):
    """Every rank's program, each from a plan that derives that rank alone."""
    programs = []
    for rank in range(nranks):
        plan = nt.build_plan(graph, nranks, tiling, preset, rank=rank)
        programs.append(plan.program(rank))
        assert not plan._programs, "a rank's plan built the all-ranks programs"
    return programs


@pytest.mark.parametrize("nranks", WORLDS)
@pytest.mark.parametrize("preset", PRESET_NAMES)
@pytest.mark.parametrize("graph_name", sorted(GRAPHS))
def test_union_of_rank_programs_is_the_all_ranks_plan(graph_name, preset, nranks):
    graph, tiling = GRAPHS[graph_name]()
    oracle = nt.build_plan(graph, nranks, tiling, preset).programs()
    derived = rank_plans(graph, nranks, tiling, preset)
    for rank in range(nranks):
        assert derived[rank] == oracle[rank], f"rank {rank} of {nranks} differs"
    sends, recvs = messages(derived)
    assert sends == recvs
    if nranks > 1 and preset != "single":
        assert sends, "no message at all: the comparison would prove little"


MESH_WORLDS = [({"dp": 2, "tp": 2}, 4), ({"fsdp": 2, "tp": 2}, 4), ({"tp": 2, "dp": 2}, 4),
               ({"dp": 3, "tp": 2}, 6), ({"fsdp": 2, "tp": 3}, 6), ({"fsdp": 4, "tp": 2}, 8)]


@pytest.mark.parametrize("mesh,nranks", MESH_WORLDS, ids=lambda v: str(v))
@pytest.mark.parametrize("graph_name", sorted(GRAPHS))
def test_meshes_too(graph_name, mesh, nranks):
    """Mesh group owners (a tile held by a tp column or a dp row) plan alike alone."""
    graph, tiling = GRAPHS[graph_name]()
    oracle = nt.build_plan(graph, nranks, tiling, mesh).programs()
    derived = rank_plans(graph, nranks, tiling, mesh)
    for rank in range(nranks):
        assert derived[rank] == oracle[rank], f"rank {rank} of {mesh} differs"
    sends, recvs = messages(derived)
    assert sends == recvs and sends


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
def test_pipelines_too(graph_name, distribution, nranks):
    """The micro-batch-major walks of pp (GPipe, 1F1B: plan/pipeline.py) are the same
    alone."""
    graph, tiling = {"mlp": mlp_graph, "gpt2": gpt2_layers_graph}[graph_name]()
    oracle = nt.build_plan(graph, nranks, tiling, distribution).programs()
    derived = rank_plans(graph, nranks, tiling, distribution)
    for rank in range(nranks):
        assert derived[rank] == oracle[rank], f"rank {rank} of {distribution} differs"
    sends, recvs = messages(derived)
    assert sends == recvs and sends
