"""Context parallelism (a "cp" mesh axis, the "cp" preset): the sequence axis is found
from attention's [key, query] tensors and blocked over the cp ranks; the key/value
tiles a rank needs travel to it once per step, in ring order, and their bytes are the
formula of docs/context_parallel.md; a cp degree the sequence tiles cannot fill is an
error. Planning only (no execution): a 1-layer GPT-2 and the 3-layer MLP.
Execution and parity: tests/models/test_cp_mpi.py (real ranks), and one simulated
run here (bitwise one rank's under deterministic=True)."""

import numpy as np
import pytest

import nntile_spmd as nt
from nntile_spmd.models import build_mlp, gpt2
from nntile_spmd.plan import lowering
from nntile_spmd.plan.instructions import Recv, Send
from nntile_spmd.plan.mesh import traffic_by_mesh_axis
from nntile_spmd.plan.plan import build_plan

CONFIG = gpt2.GPT2Config(vocab_size=32, n_positions=24, n_embd=8, n_layer=1, n_head=2)
SEQ, BATCH, ITEM = 24, 2, 8   # fp64


@pytest.fixture(scope="module")
def graph():
    return gpt2.build_gpt2(CONFIG, batch=BATCH, seq=SEQ, dtype="fp64").graph


def plan(graph, distribution, nranks, seq_tile):
    return build_plan(graph, nranks, nt.TilingStrategy.manual({"h_in": [8, seq_tile, 1]}),
                      distribution)


def sent(plan, names) -> int:
    """Bytes sent per step (all ranks) of tiles of `names` (a reduction's partials too)."""
    return sum(i.nbytes for program in plan.programs() for i in program
               if type(i) is Send and i.key[0].split("~")[0] in names)


ZIGZAG = {"cp_layout": "zigzag"}


@pytest.mark.parametrize("cp, tiles_per_rank, layout",
                         [(2, 1, {}), (3, 2, {}), (4, 1, {}), (2, 2, ZIGZAG), (3, 2, ZIGZAG)])
def test_key_value_bytes_are_the_formula(graph, cp, tiles_per_rank, layout):
    """Forward: every K and V tile goes once to each cp rank that holds a later query
    tile, (cp - 1) T B d s in all with contiguous blocks, 3/2 of it with zigzag pairs;
    backward: the partial dK and dV of those ranks the same bytes."""
    p = plan(graph, {"cp": cp} | layout, cp, SEQ // (cp * tiles_per_rank))
    formula = (cp - 1) * SEQ * BATCH * CONFIG.n_embd * ITEM * (1.5 if layout else 1)
    assert sent(p, ("h0_k", "h0_v")) == formula
    assert sent(p, ("h0_k_grad", "h0_v_grad")) == formula
    # the parameters are replicated along cp: their gradients are all-reduced (2(cp-1)/cp
    # of them per rank), as under ddp
    assert sent(p, ("h0_fc_weight_grad",)) == 2 * (cp - 1) * CONFIG.inner * CONFIG.n_embd * ITEM


def test_keys_arrive_in_ring_order(graph):
    """Rank r computes with its own key tile first, then receives those of r - 1, r - 2,
    ..., 0 in that order; every key tile is sent by its owner, in turn to r + 1, r + 2..."""
    cp = 4
    programs = plan(graph, "cp", cp, SEQ // cp).programs()
    for rank, program in enumerate(programs):
        first_batch = [i for i in program if type(i) in (Send, Recv)
                       and i.key[0] == "h0_k" and i.key[1][2] == 0]
        received = [i.peer for i in first_batch if type(i) is Recv]
        assert received == list(range(rank - 1, -1, -1))
        assert [i.peer for i in first_batch if type(i) is Send] == list(range(rank + 1, cp))


def test_mesh_axes_place_batch_and_sequence(graph):
    """{"fsdp": 2, "cp": 2}: rank = fsdp index * 2 + cp index; the scores [key, query,
    batch, heads] are blocked by query over cp and by batch over fsdp."""
    p = plan(graph, {"fsdp": 2, "cp": 2}, 4, SEQ // 4)
    owners = p.owners["h0_context_scores"]   # grid [4, 4, 2, 1]
    for key in range(4):
        for query in range(4):
            for batch in range(2):
                assert owners[key, query, batch, 0] == batch * 2 + query // 2
    # the K/V tiles travel along cp only; the bytes by mesh axis take the mesh's options
    split = traffic_by_mesh_axis(p, {"fsdp": 2, "cp": 2})
    assert sent(p, ("h0_k", "h0_v")) <= split["cp"]
    assert traffic_by_mesh_axis(p, {"fsdp": 2, "cp": 2, "cp_layout": "contiguous"}) == split


def test_zigzag_pairs_blocks_from_both_ends(graph):
    """cp_layout="zigzag": of 2 cp sequence blocks, rank r holds blocks r and 2 cp - 1 - r,
    so each rank computes the same number of causal score tiles."""
    cp = 3
    p = plan(graph, {"cp": cp, "cp_layout": "zigzag"}, cp, SEQ // (2 * cp))
    assert list(p.owners["h_in"][0, :, 0]) == [0, 1, 2, 2, 1, 0]
    scores = p.owners["h0_context_scores"][:, :, 0, 0]
    computed = [sum(1 for k in range(6) for q in range(k, 6) if scores[k, q] == rank)
                for rank in range(cp)]
    assert computed == [7, 7, 7]
    # auto tiling cuts the sequence into two blocks per cp rank (contiguous: one)
    for layout, tiles in ((ZIGZAG, 2 * cp), ({}, cp)):
        auto = build_plan(graph, cp, None, {"cp": cp} | layout)
        assert auto.tilings["h_in"].dims[1].num_tiles == tiles


def test_a_rank_planning_alone_derives_the_same_program(graph):
    """What a real MPI rank does (plan its own program alone) gives the program the
    all-ranks plan gives it (ring order, mesh groups, zigzag), with StepTables as in
    tests/plan/test_plan_rank.py."""
    from test_plan_rank import derived_equal_the_oracle
    tiling = nt.TilingStrategy.manual({"h_in": [8, SEQ // 4, 1]})
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(lowering, "TABLE_MIN_STEPS", 2)
        assert derived_equal_the_oracle(graph, 4, tiling, {"fsdp": 2, "cp": 2} | ZIGZAG)


def test_too_few_sequence_tiles_is_an_error(graph):
    with pytest.raises(ValueError, match=r"cp=4 \(contiguous\) needs at least 4 tiles of the"):
        plan(graph, {"cp": 4}, 4, SEQ // 3)
    with pytest.raises(ValueError, match=r"cp=3 \(contiguous\) needs at least 3 tiles"):
        plan(graph, {"dp": 2, "cp": 3}, 6, SEQ // 2)
    with pytest.raises(ValueError, match=r"cp=2 \(zigzag\) needs at least 4 tiles"):
        plan(graph, {"cp": 2, "cp_layout": "zigzag"}, 2, SEQ // 3)
    with pytest.raises(ValueError, match=r"cp_layout 'zigzag' needs one of .* and a cp axis"):
        plan(graph, {"dp": 2, "cp_layout": "zigzag"}, 2, SEQ // 3)
    small = gpt2.build_gpt2(CONFIG, batch=1, seq=2, dtype="fp64", with_grads=False)
    with pytest.raises(ValueError, match=r"sequence has only 2 position"):
        build_plan(small.graph, 3, None, "cp")


def test_a_graph_without_attention_is_an_error():
    model = build_mlp([6, 5, 3], 4, dtype="fp64")
    with pytest.raises(ValueError, match=r"cp splits the sequence axis.*has no attention"):
        build_plan(model.graph, 2, None, {"cp": 2})


@pytest.mark.parametrize("distribution, seq_tile", [("cp", 2), ({"cp": 3} | ZIGZAG, 1)],
                         ids=["contiguous", "zigzag"])
def test_simulated_cp_is_bitwise_one_rank(distribution, seq_tile):
    """GPT-2 (tiny, fp64) on 3 simulated cp ranks, one sequence tile each (zigzag: two),
    with deterministic=True: loss, logits and every gradient bitwise one rank's."""
    config = gpt2.GPT2Config(vocab_size=16, n_positions=6, n_embd=8, n_layer=1, n_head=2)
    model = gpt2.build_gpt2(config, batch=1, seq=6, dtype="fp64")
    rng = np.random.default_rng(0)
    params = model.init_params(rng)
    ids = rng.integers(0, 16, (6, 1)).astype(np.int64)

    def run(ranks, distribution):
        cg = nt.compile(model.graph, comm=nt.SimulatedWorld(ranks), distribution=distribution,
                        tiling=nt.TilingStrategy.manual({"h_in": [8, seq_tile, 1]}),
                        deterministic=True)
        for name, value in params.items():
            cg.bind_data(name, value)
        cg.bind_data("input_ids", ids)
        cg.bind_data("targets", np.roll(ids, -1, axis=0))
        cg.execute()
        return [cg.get_output(name) for name in ["loss", "logits"] + model.param_names]

    for ours, single in zip(run(3, distribution), run(1, "single")):
        assert np.array_equal(ours, single)


class TinyGPT2:
    """GPT-2 of 2 layers (pp needs a layer per stage), fp64, two sequences of 4 in
    tiles of 2, and one rank's loss, logits and gradients (computed once)."""

    def __init__(self):
        config = gpt2.GPT2Config(vocab_size=8, n_positions=4, n_embd=4, n_layer=2, n_head=1)
        self.model = gpt2.build_gpt2(config, batch=2, seq=4, dtype="fp64")
        rng = np.random.default_rng(0)
        ids = rng.integers(0, 8, (4, 2)).astype(np.int64)
        self.data = {**self.model.init_params(rng), "input_ids": ids,
                     "targets": np.roll(ids, -1, axis=0)}
        self.names = ["loss", "logits"] + self.model.param_names
        self.single = self.run(1, "single")

    def run(self, ranks, distribution):
        cg = nt.compile(self.model.graph, comm=nt.SimulatedWorld(ranks),
                        distribution=distribution,
                        tiling=nt.TilingStrategy.manual({"h_in": [4, 2, 1]}))
        for name, value in self.data.items():
            cg.bind_data(name, value)
        cg.execute()
        return [cg.get_output(name) for name in self.names]


@pytest.fixture(scope="module")
def tiny_gpt2():
    return TinyGPT2()


@pytest.mark.parametrize("axis", ["dp", pytest.param("tp", marks=pytest.mark.slow),
                                  pytest.param("pp", marks=pytest.mark.slow)])
def test_cp_meshes_with_dp_tp_and_pp_equal_one_rank(tiny_gpt2, axis):
    """{axis: 2, "cp": 2} on 4 simulated ranks: loss, logits and gradients equal one
    rank's."""
    for name, ours, reference in zip(tiny_gpt2.names, tiny_gpt2.run(4, {axis: 2, "cp": 2}),
                                     tiny_gpt2.single):
        np.testing.assert_allclose(ours, reference, rtol=1e-12, atol=1e-14,
                                   err_msg=f"{name} under {axis} x cp")
