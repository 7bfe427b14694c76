"""mask="causal": attention whose score and probability blocks above the diagonal are
never computed nor stored gives bitwise the results of the same mask as a bool tensor
(fp64, forward and gradients, 1 and 3 simulated ranks, every preset, uneven tilings whose
key and query tiles do not line up), with fewer FLOPs and no task on an absent tile."""

import numpy as np
import pytest

import nntile_spmd as nt
from nntile_spmd import ops

D, T, DV, B = 3, 11, 2, 2
SCALE = 0.6
SHAPES = {"q": (D, T, B), "k": (D, T, B), "v": (DV, T, B)}
# key tiles of 3 and query tiles of 4: diagonal blocks of both kinds, uneven last tiles
TILINGS = [None, {"q": [2, 4, 1], "k": [2, 3, 1], "v": [1, 3, 1]},
           {"q": [3, 5, 2], "k": [3, 2, 2], "v": [2, 2, 2]}]
CASES = [(1, "single", 0), (1, "single", 1), (3, "single", 1), (3, "ddp", 1),
         (3, "fsdp", 1), (3, "tp", 1), (3, "ddp", 2), (3, "fsdp", 2), (3, "tp", 2)]


def attention_graph(mask_kind, flash):
    """out = attention(q, k, v) and its gradients (by nt.grad, or flash_sdpa_bwd_cudnn)."""
    g = nt.LogicalGraph(f"attention_{mask_kind}")
    t = {name: g.tensor(list(shape), name, "fp64", external=True, requires_grad=True)
         for name, shape in SHAPES.items()}
    mask = g.tensor([T, T], "mask", "bool", external=True) if mask_kind == "tensor" \
        else "causal"
    if flash:
        dout = g.tensor([DV, T, B], "dout", "fp64", external=True)
        grads = [g.tensor(list(SHAPES[name]), f"d{name}", "fp64", persistent=True)
                 for name in ("q", "k", "v")]
        ops.flash_sdpa_bwd_cudnn(t["q"], t["k"], t["v"], dout, *grads, "attn", mask=mask,
                                 scale=SCALE)
        return g, [grad.name for grad in grads]
    out = ops.scaled_dot_product_attention(t["q"], t["k"], t["v"], "out", mask=mask,
                                           scale=SCALE).mark_output()
    loss = ops.multiply(out, ops.gelu(out, "shaped"), "loss").mark_output()
    grads = nt.grad(g, loss, [t["q"], t["k"], t["v"]])
    return g, ["out"] + [grad.name for grad in grads]


def run(mask_kind, ranks, preset, tiles, flash=False):
    g, outputs = attention_graph(mask_kind, flash)
    tiling = None if tiles is None else nt.TilingStrategy.manual(tiles)
    cg = nt.compile(g, comm=nt.SimulatedWorld(ranks), distribution=preset, tiling=tiling)
    rng = np.random.default_rng(7)
    for name, shape in SHAPES.items():
        cg.bind_data(name, 2 * rng.standard_normal(shape))
    if mask_kind == "tensor":
        cg.bind_data("mask", np.arange(T)[:, None] <= np.arange(T)[None, :])
    if flash:
        cg.bind_data("dout", rng.standard_normal((DV, T, B)))
        for name in ("dq", "dk", "dv"):
            cg.bind_data(name, rng.standard_normal(SHAPES[name[1:]]))
    cg.execute()
    return {name: cg.get_output(name) for name in outputs}, cg


@pytest.mark.parametrize("flash", [False, True], ids=["autodiff", "flash_bwd"])
@pytest.mark.parametrize("ranks, preset, tiling", CASES)
def test_causal_is_bitwise_the_bool_mask(ranks, preset, tiling, flash):
    dense, dense_cg = run("tensor", ranks, preset, TILINGS[tiling], flash)
    sparse, sparse_cg = run("causal", ranks, preset, TILINGS[tiling], flash)
    for name, value in dense.items():
        assert np.all(np.isfinite(value)), name
        np.testing.assert_array_equal(sparse[name], value, err_msg=name)
    if tiling:   # some blocks lie above the diagonal: their work is gone
        assert sparse_cg.plan.flops() < dense_cg.plan.flops()
    for rank in range(ranks):
        assert sparse_cg.memory_on_rank(rank) <= dense_cg.memory_on_rank(rank)
    sparse_cg.check_stats()


def test_no_task_touches_an_absent_tile():
    _, cg = run("causal", 3, "ddp", TILINGS[1])
    plan = cg.plan
    # the [Tk, Tq] tensors of the forward and of the gradients
    sparse = [t for t in plan.graph.tensors() if t.causal_dims is not None]
    assert {t.name for t in sparse} >= {"out_scores", "out_probs"}
    assert any(t.grad_of == "out_probs" for t in sparse)
    for tensor in sparse:
        tiling = plan.tilings[tensor.name]
        keys, queries = tiling.dims[0].boundaries, tiling.dims[1].boundaries
        absent = [coord for coord in tiling.coords()
                  if keys[coord[0]] >= queries[coord[1] + 1]]
        assert absent, tensor.name   # key tiles of 3 under query tiles of 4
        for rank in range(3):
            listing = cg.program(rank)
            for coord in absent:
                key = f"{tensor.name}[{','.join(map(str, coord))}]"
                assert key not in listing, (rank, key)


def test_mask_causal_runs_only_on_tiles_crossing_the_diagonal():
    g = nt.LogicalGraph("mask")
    x = g.tensor([7, 7, 2], "x", "fp64", external=True)
    y = ops.mask_causal(-1.0, ops.scale(x, "y", 1.0)).mark_output()
    cg = nt.compile(g, comm=nt.SimulatedWorld(1),
                    tiling=nt.TilingStrategy.manual({"x": [3, 2, 2]}))
    value = np.random.default_rng(1).standard_normal((7, 7, 2))
    cg.bind_data("x", value)
    cg.execute()
    keep = np.arange(7)[:, None] <= np.arange(7)[None, :]
    np.testing.assert_array_equal(cg.get_output(y.name), np.where(keep[..., None], value, -1.0))
    masks = [line for line in cg.program(0).splitlines() if "mask_causal" in line]
    crossing = sum(1 for i in range(3) for j in range(4) if 3 * i + min(3, 7 - 3 * i) - 1 > 2 * j)
    assert len(masks) == crossing < 12


@pytest.mark.parametrize("make, fragments", [
    (lambda q, k, v: ops.scaled_dot_product_attention(q, k, v, "a", mask="banded"),
     ["scaled_dot_product_attention:", "mask='banded'", "q[3, 4, 2]"]),
    (lambda q, k, v: ops.scaled_dot_product_attention(q, k5(q), k5(q, "v5"), "a",
                                                      mask="causal"),
     ["scaled_dot_product_attention:", 'mask="causal" needs as many keys as queries',
      "k5[3, 5, 2]"]),
])
def test_bad_causal_masks_raise_naming_the_op_and_tensors(make, fragments):
    g = nt.LogicalGraph("bad")
    q, k, v = (g.tensor([3, 4, 2], name, "fp64") for name in ("q", "k", "v"))
    with pytest.raises(ValueError) as error:
        make(q, k, v)
    for fragment in fragments:
        assert fragment in str(error.value)


def k5(q, name="k5"):
    return q.graph.tensor([3, 5, 2], name, "fp64")


def test_a_reader_that_cannot_skip_absent_tiles_is_refused_when_planning():
    g, _ = attention_graph("causal", flash=False)
    ops.max(g.get_tensor("out_probs"), "probs_max", axes=0).mark_output()
    with pytest.raises(ValueError, match="block-sparse"):
        nt.compile(g, comm=nt.SimulatedWorld(1),
                   tiling=nt.TilingStrategy.manual(TILINGS[1]))
