"""Activation recomputation on GPT-2 (build_gpt2(recompute=...), graph/recompute.py):
fp64 logits, loss and every gradient are bitwise those without it on 1 rank and on
3 simulated ranks under every preset, and on a 4-rank mesh with deterministic=True
(by default the planner may sum a gradient's partial results in another order when
the recomputed tiles sit elsewhere: it picks the cheaper transfer); the planned peak per rank
drops and the measured peak equals the planned one; the extra FLOPs are in the plan
and its report."""

import numpy as np
import pytest
from gpt2_helpers import BATCH, SEQ, SMALL_TILES, hf_reference

import nntile_spmd as nt
from nntile_spmd.graph.recompute import recomputed_ops
from nntile_spmd.models import gpt2


@pytest.fixture(scope="module")
def reference():
    return hf_reference()


def run(reference, ranks, distribution, recompute, deterministic=False):
    config, state, ids, targets, _ = reference
    model = gpt2.build_gpt2(config, batch=BATCH, seq=SEQ, dtype="fp64", recompute=recompute)
    cg = nt.compile(model.graph, comm=nt.SimulatedWorld(ranks), distribution=distribution,
                    tiling=nt.TilingStrategy.manual(SMALL_TILES), deterministic=deterministic)
    model.load_hf_state_dict(cg, state)
    cg.bind_data("input_ids", ids)
    cg.bind_data("targets", targets)
    cg.execute()
    cg.check_stats()   # measured peak bytes, traffic and FLOPs equal the plan's, per rank
    values = {"logits": cg.get_output("logits"), "loss": cg.get_output("loss"),
              **{g.name: cg.get_output(g.name) for g in model.grads}}
    measured = [cg.get_stats(rank).peak_bytes for rank in range(ranks)]
    return values, measured, cg


@pytest.mark.parametrize("ranks,distribution", [(1, "single"), (3, "ddp"), (3, "fsdp"),
                                                (3, "tp"), (4, {"fsdp": 2, "tp": 2})],
                         ids=["1-single", "3-ddp", "3-fsdp", "3-tp", "4-fsdp2xtp2"])
def test_bitwise_equal_and_less_memory(reference, ranks, distribution):
    deterministic = not isinstance(distribution, str)
    plain, plain_peak, plain_cg = run(reference, ranks, distribution, False, deterministic)
    again, again_peak, cg = run(reference, ranks, distribution, True, deterministic)
    assert len(plain) > 30
    assert [name for name in plain if not np.array_equal(plain[name], again[name])] == []
    assert max(again_peak) < max(plain_peak), (again_peak, plain_peak)
    # FLOPs: the plain plan's plus exactly the recomputed copies'
    extra = cg.plan.recompute_flops()
    assert extra > 0
    assert cg.plan.flops() - extra == pytest.approx(plain_cg.plan.flops(), rel=0.02)
    assert "recomputation: " in cg.dump_plan() and "recomputation" not in plain_cg.dump_plan()


def test_one_rank_flops_are_exactly_the_plain_ones_plus_the_copies(reference):
    _, _, plain = run(reference, 1, "single", False)
    _, _, again = run(reference, 1, "single", [1])
    assert again.plan.flops() == plain.plan.flops() + again.plan.recompute_flops()
    copies = recomputed_ops(again.graph)
    assert copies and all(name.startswith("h1_") or again.graph.get_op(name).outputs[0]
                          .name.startswith("h1_") for name in copies.values())


def test_segment_keeps_only_its_input(reference):
    """Backward of a recomputed block reads no activation of that block's forward:
    only its input (the previous block's output), the parameters and copies."""
    config = reference[0]
    model = gpt2.build_gpt2(config, batch=BATCH, seq=SEQ, dtype="fp64", recompute=True)
    graph = model.graph
    forward_written = {t.name for op in graph.ops() if op.phase == "forward"
                       for t in op.outputs}
    read_in_backward = {t.name for op in graph.ops() if op.phase == "backward"
                        for t in op.reads}
    kept = forward_written & read_in_backward
    for layer in range(config.n_layer):
        inside = {name for name in kept if name.startswith(f"h{layer}_")}
        # the block's own output is the next block's input: the checkpoint
        assert inside <= {f"h{layer}_mlp_residual"}, sorted(inside)


def test_bad_recompute_arguments(reference):
    config = reference[0]
    with pytest.raises(ValueError, match="block indices"):
        gpt2.build_gpt2(config, batch=BATCH, seq=SEQ, recompute=[5])
    with pytest.raises(ValueError, match="needs with_grads"):
        gpt2.build_gpt2(config, batch=BATCH, seq=SEQ, recompute=True, with_grads=False)
