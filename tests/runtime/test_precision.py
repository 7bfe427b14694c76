"""bf16 tiles end to end on simulated ranks: results against the NumPy reference under
every preset on 1 and 3 ranks with uneven tiles, half the bytes of fp32 in the plan and
in the transport, the fp32_fast_* gemm modes, and GPT-2's bf16 mixed precision."""

import ml_dtypes
import numpy as np
import pytest
from helpers import stat_problems
from precision_cases import PRESETS, differences, layer_inputs, reference, run_layer

import nntile_spmd as nt
from nntile_spmd.models import gpt2
from nntile_spmd.train import add_optimizer


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("ranks", [1, 3])
def test_bf16_layer_matches_reference(ranks, preset):
    values = layer_inputs()
    got, cg = run_layer("bf16", nt.SimulatedWorld(ranks), preset, values)
    assert not differences(got, reference(values))
    assert not stat_problems(cg)
    assert cg.get_output("a").dtype == np.dtype(ml_dtypes.bfloat16)


@pytest.mark.parametrize("preset", ["ddp", "fsdp", "tp"])
def test_bf16_moves_half_the_bytes_of_fp32(preset):
    """Same plan, 2-byte tiles: planned == measured, and exactly half of fp32's."""
    values, sent, peak = layer_inputs(), {}, {}
    for dtype in ("fp32", "bf16"):
        _, cg = run_layer(dtype, nt.SimulatedWorld(3), preset, values)
        assert not stat_problems(cg), dtype
        sent[dtype] = [cg.get_stats(rank).bytes_transferred for rank in range(3)]
        peak[dtype] = [cg.memory_on_rank(rank) for rank in range(3)]
    assert sum(sent["fp32"]) > 0
    assert sent["fp32"] == [2 * b for b in sent["bf16"]]
    assert peak["fp32"] == [2 * b for b in peak["bf16"]]


def rounded(values, compute_type):
    if compute_type == "tf32":   # 10 significand bits, ties to even (float64 arithmetic)
        exponent = np.floor(np.log2(np.abs(np.where(values == 0, 1.0, values))))
        return np.round(values * 2.0 ** (10 - exponent)) / 2.0 ** (10 - exponent)
    narrow = ml_dtypes.bfloat16 if compute_type == "bf16" else np.float16
    return values.astype(narrow).astype(np.float64)


@pytest.mark.parametrize("dtype, compute_type", [("fp32_fast_tf32", "tf32"),
                                                 ("fp32_fast_bf16", "bf16"),
                                                 ("fp32_fast_fp16", "fp16")])
@pytest.mark.parametrize("ranks, preset", [(1, "single"), (3, "ddp"), (3, "tp")])
def test_fast_fp32_gemm_rounds_its_inputs(dtype, compute_type, ranks, preset):
    """A gemm of fp32_fast_* tensors (float32 tiles) equals the float64 product of
    inputs rounded to the reduced type; plain fp32 does not round."""
    rng = np.random.default_rng(3)
    a_values, b_values = rng.standard_normal((6, 9)), rng.standard_normal((9, 7))
    g = nt.LogicalGraph("fast")
    a = g.tensor([6, 9], "a", dtype=dtype, external=True)
    b = g.tensor([9, 7], "b", dtype=dtype, external=True)
    nt.ops.gemm(a, b, "c").mark_output()
    cg = nt.compile(g, comm=nt.SimulatedWorld(ranks), distribution=preset,
                    tiling=nt.TilingStrategy.manual({"a": [4, 5], "b": [5, 3]}))
    cg.bind_data("a", a_values.astype(np.float32))
    cg.bind_data("b", b_values.astype(np.float32))
    cg.execute()
    got = cg.get_output("c")
    a32, b32 = a_values.astype(np.float32), b_values.astype(np.float32)
    want = rounded(a32.astype(np.float64), compute_type) @ rounded(b32.astype(np.float64),
                                                                     compute_type)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    exact = a32.astype(np.float64) @ b32.astype(np.float64)
    assert np.abs(got - exact).max() > 1e-4     # the inputs really were rounded


# -- GPT-2 in bf16 mixed precision ----------------------------------------------------------
CONFIG = dict(vocab_size=23, n_positions=8, n_embd=16, n_layer=2, n_head=4)
BATCH, SEQ, STEPS = 3, 8, 6


def gpt2_curve(compute_dtype, ranks, preset, steps=STEPS):
    model = gpt2.build_gpt2(gpt2.GPT2Config(**CONFIG), batch=BATCH, seq=SEQ, dtype="fp32",
                            compute_dtype=compute_dtype)
    add_optimizer(model.graph, model.params, model.grads, "adamw", lr=1e-2,
                  weight_decay=0.01)
    cg = nt.compile(model.graph, comm=nt.SimulatedWorld(ranks), distribution=preset)
    for name, value in model.init_params(np.random.default_rng(1)).items():
        cg.bind_data(name, value)
    rng = np.random.default_rng(0)
    stream = np.tile(rng.integers(0, CONFIG["vocab_size"], 5), 20)
    losses = []
    for _ in range(steps):
        starts = rng.integers(0, len(stream) - SEQ - 1, BATCH)
        cg.bind_data("input_ids", np.stack([stream[s:s + SEQ] for s in starts], 1))
        cg.bind_data("targets", np.stack([stream[s + 1:s + SEQ + 1] for s in starts], 1))
        cg.execute()
        losses.append(float(cg.get_output("loss")))
    return np.array(losses), model, cg


@pytest.fixture(scope="module")
def fp32_curve():
    return gpt2_curve(None, 1, "single")[0]


@pytest.mark.parametrize("ranks, preset", [(1, "single"), (3, "ddp"), (3, "fsdp"),
                                           (3, "tp")])
def test_gpt2_bf16_mixed_follows_fp32(fp32_curve, ranks, preset):
    """fp32 master weights, bf16 forward/backward: the loss curve within 1% of fp32's,
    the parameters, gradients and optimizer state fp32, planned == measured."""
    losses, model, cg = gpt2_curve("bf16", ranks, preset)
    np.testing.assert_allclose(losses, fp32_curve, rtol=1e-2)
    assert losses[-1] < 0.9 * losses[0]
    state = [t for t in model.graph.tensors() if t.role == "state" and t.dtype != "int64"]
    dtypes = {t.dtype for t in model.params + model.grads + state}
    assert dtypes == {"fp32"}, dtypes
    assert model.graph.get_tensor("h0_fc_weight_bf16").dtype == "bf16"
    assert model.graph.get_tensor("h0_act").dtype == "bf16"
    assert not stat_problems(cg)


def bytes_by_op_type(cg, ranks):
    totals = {}
    for rank in range(ranks):
        for op_type, entry in cg.get_stats(rank).by_op_type.items():
            totals[op_type] = totals.get(op_type, 0) + entry.bytes_sent
    return totals


def test_fsdp_gathers_the_bf16_copies_not_the_fp32_masters():
    """Under FSDP a weight's bf16 copy is sharded with it: the cast runs on the owner
    and the gemms receive bf16 tiles, half the bytes of fp32's gather and reduction
    (the casts themselves move nothing)."""
    sent = {}
    for compute in (None, "bf16"):
        _, _, cg = gpt2_curve(compute, 2, "fsdp", steps=1)
        assert not stat_problems(cg)
        sent[compute] = bytes_by_op_type(cg, 2)
    assert sent["bf16"].get("cast", 0) == 0
    assert 0 < sent["bf16"]["gemm"] <= 0.55 * sent[None]["gemm"]


@pytest.mark.parametrize("tiles", [{"x": [6, 1], "y": [3, 2]}, {"x": [3, 2], "y": [3, 4]}],
                         ids=["view", "copy"])
def test_bf16_reshape_as_view_and_as_copy(tiles):
    """A bf16 reshape the plan aliases (view) or copies gives the same tiles: kernels
    running on a viewed bf16 tile compute in fp32 like any other."""
    g = nt.LogicalGraph("bf16_view")
    x = g.tensor([6, 4], "x", "bf16", external=True)
    y = nt.ops.reshape(nt.ops.scale(x, "h", 2.0), "y", [3, 8])
    nt.ops.scale(y, "z", 3.0).mark_output()
    cg = nt.compile(g, comm=nt.SimulatedWorld(2), distribution="ddp",
                    tiling=nt.TilingStrategy.explicit(tiles))
    data = np.arange(24, dtype=np.float32).reshape(6, 4, order="F") / 8
    cg.bind_data("x", data.astype(ml_dtypes.bfloat16))
    cg.execute()
    want = (6 * data).reshape(3, 8, order="F")
    assert np.array_equal(np.asarray(cg.get_output("z"), dtype=np.float32), want)
