"""Every backward rule of nt.grad against central finite differences (fp64), on one
rank and on 3 simulated ranks under FSDP (the emitted ops are ordinary ops).

Cases are tiled automatically with tiny tiles, or by TILES (uneven manual tiles that
split the reduced axes over several tiles and ranks)."""

import numpy as np
import pytest

import nntile_spmd as nt
from nntile_spmd import ops

RNG = np.random.default_rng(11)


def positive(shape):
    return RNG.uniform(0.5, 2.0, shape)


def normal(shape):
    return RNG.standard_normal(shape)


def labels(shape, classes=4):
    return RNG.integers(0, classes, shape)


def labels_ignored(shape, classes=5):
    """Labels in [0, classes) with about a third ignore_index -100 (at least one kept)."""
    values = np.where(RNG.random(shape) < 0.35, -100, RNG.integers(0, classes, shape))
    values.flat[0] = classes - 1
    return values


def keep_mask(shape):
    """A bool mask (True = keep), about 60% True."""
    return RNG.random(shape) < 0.6


def causal(shape):
    """The causal mask [key, query]: key <= query is kept."""
    return np.arange(shape[0])[:, None] <= np.arange(shape[1])[None, :]


# samplers of inputs that are data, not differentiated: sampler -> graph dtype
DATA_DTYPES = {labels: "int64", labels_ignored: "int64", keep_mask: "bool", causal: "bool"}


# (case id, {input name: (shape, sampler)}, build(tensors) -> output tensor)
CASES = [
    ("gelu", {"x": ((3, 4), normal)}, lambda t: ops.gelu(t["x"], "out")),
    ("gelutanh", {"x": ((3, 4), normal)}, lambda t: ops.gelutanh(t["x"], "out")),
    ("relu", {"x": ((3, 4), positive)}, lambda t: ops.relu(t["x"], "out")),
    ("silu", {"x": ((3, 4), normal)}, lambda t: ops.silu(t["x"], "out")),
    ("sqrt", {"x": ((3, 4), positive)}, lambda t: ops.sqrt(t["x"], "out")),
    ("add", {"x": ((3, 4), normal), "y": ((3, 4), normal)},
     lambda t: ops.add(0.7, t["x"], -1.3, t["y"], "out")),
    ("multiply", {"x": ((3, 4), normal), "y": ((3, 4), normal)},
     lambda t: ops.multiply(t["x"], t["y"], "out", alpha=0.5)),
    ("scale", {"x": ((3, 4), normal)}, lambda t: ops.scale(t["x"], "out", 2.5)),
    ("gemm_nn", {"a": ((3, 4), normal), "b": ((4, 5), normal)},
     lambda t: ops.gemm(t["a"], t["b"], "out", 0.9)),
    ("gemm_tn", {"a": ((4, 3), normal), "b": ((4, 5), normal)},
     lambda t: ops.gemm(t["a"], t["b"], "out", trans_a=True)),
    ("gemm_nt", {"a": ((3, 4), normal), "b": ((5, 4), normal)},
     lambda t: ops.gemm(t["a"], t["b"], "out", trans_b=True)),
    ("gemm_tt", {"a": ((4, 3), normal), "b": ((5, 4), normal)},
     lambda t: ops.gemm(t["a"], t["b"], "out", trans_a=True, trans_b=True)),
    ("gemm_ndim2_batch", {"a": ((3, 2, 2, 2), normal), "b": ((2, 2, 4, 2), normal)},
     lambda t: ops.gemm(t["a"], t["b"], "out", ndim=2, batch_ndim=1)),
    ("sum_fiber", {"x": ((3, 4, 2), normal)}, lambda t: ops.sum_fiber(t["x"], "out", axis=1)),
    ("add_fiber", {"f": ((4,), normal), "x": ((3, 4), normal)},
     lambda t: ops.add_fiber(1.5, t["f"], 0.5, t["x"], "out", axis=1)),
    ("transpose", {"x": ((3, 4, 2), normal)}, lambda t: ops.transpose(t["x"], "out", 2.0, 2)),
    ("permute", {"x": ((3, 4, 2), normal)},
     lambda t: ops.permute(t["x"], "out", (2, 1, 0), -1.5)),
    ("copy", {"x": ((3, 4), normal)}, lambda t: ops.copy(t["x"], "out")),
    ("softmax_axis0", {"x": ((4, 3), normal)}, lambda t: ops.softmax(t["x"], "out", 0)),
    ("softmax_axis1", {"x": ((3, 4), normal)}, lambda t: ops.softmax(t["x"], "out", 1)),
    ("embedding", {"index": ((2, 3), labels), "vocab": ((3, 4), normal)},
     lambda t: ops.embedding(t["index"], t["vocab"], "out", axis=1)),
    ("cross_entropy", {"logits": ((4, 5), normal), "index": ((5,), labels)},
     lambda t: ops.cross_entropy_loss(t["logits"], t["index"], "out", 0.2)),
    ("mse_both_sides", {"x": ((3, 4), normal), "y": ((3, 4), normal)},
     lambda t: ops.mse_loss(t["x"], t["y"], "out", 0.5)),
    ("sumprod_slice", {"x": ((3, 2, 5), normal), "y": ((3, 2, 5), normal)},
     lambda t: ops.sumprod_slice(t["x"], t["y"], "out", axis=2, alpha=0.7)),
    ("sumprod_slice_square", {"x": ((3, 5), normal)},
     lambda t: ops.sumprod_slice(t["x"], t["x"], "out", axis=1)),
    ("sum_slice", {"x": ((3, 5), normal)}, lambda t: ops.sum_slice(t["x"], "out", 1, 0.5)),
    ("add_slice", {"s": ((3,), normal), "x": ((3, 5), normal)},
     lambda t: ops.add_slice(-1.3, t["s"], 0.7, t["x"], "out", axis=1)),
    ("multiply_slice", {"s": ((2, 5), normal), "x": ((3, 2, 5), normal)},
     lambda t: ops.multiply_slice(t["s"], t["x"], "out", axis=0, alpha=-0.8)),
    ("multiply_fiber", {"f": ((4,), normal), "x": ((3, 4, 2), normal)},
     lambda t: ops.multiply_fiber(t["f"], t["x"], "out", axis=1, alpha=0.5)),
    ("multiply_fiber_batch", {"f": ((3, 2), normal), "x": ((3, 4, 2), normal)},
     lambda t: ops.multiply_fiber(t["f"], t["x"], "out", axis=0, batch_ndim=1)),
    ("sumprod_fiber", {"x": ((3, 4, 2), normal), "y": ((3, 4, 2), normal)},
     lambda t: ops.sumprod_fiber(t["x"], t["y"], "out", axis=1, alpha=1.5)),
    ("sumprod_fiber_square", {"x": ((3, 5), normal)},
     lambda t: ops.sumprod_fiber(t["x"], t["x"], "out", axis=0)),
    ("pow", {"x": ((3, 4), positive)}, lambda t: ops.pow(t["x"], "out", 1.5, -0.5)),
    ("logsumexp_axis1", {"x": ((3, 5, 2), normal)},
     lambda t: ops.logsumexp(t["x"], "out", axis=1)),
    ("logsumexp_last", {"x": ((3, 5), normal)}, lambda t: ops.logsumexp(t["x"], "out", axis=1)),
    ("softmax_from_logsumexp", {"x": ((3, 5, 2), normal)},
     lambda t: ops.softmax_from_logsumexp(ops.logsumexp(t["x"], "lse", axis=1), t["x"], "out",
                                          axis=1)),
    ("softmax_from_logsumexp_last", {"x": ((3, 5), normal)},
     lambda t: ops.softmax_from_logsumexp(ops.logsumexp(t["x"], "lse", axis=1), t["x"], "out",
                                          axis=1)),
    ("sdpa_causal", {"q": ((3, 5, 2), normal), "k": ((3, 5, 2), normal),
                     "v": ((2, 5, 2), normal), "mask": ((5, 5), causal)},
     lambda t: ops.scaled_dot_product_attention(t["q"], t["k"], t["v"], "out", mask=t["mask"])),
    ("sdpa_causal_structural", {"q": ((3, 5, 2), normal), "k": ((3, 5, 2), normal),
                                "v": ((2, 5, 2), normal)},
     lambda t: ops.scaled_dot_product_attention(t["q"], t["k"], t["v"], "out", mask="causal")),
    ("mask_causal", {"x": ((4, 3, 2), normal)},
     lambda t: ops.mask_causal(-1.5, ops.scale(t["x"], "out", 2.0))),
    ("sdpa_heads_no_mask", {"q": ((2, 3, 2, 2), normal), "k": ((2, 4, 2, 2), normal),
                            "v": ((3, 4, 2, 2), normal)},
     lambda t: ops.scaled_dot_product_attention(t["q"], t["k"], t["v"], "out", scale=0.8)),
    ("cross_entropy_ignore_index", {"logits": ((5, 3, 2), normal),
                                    "index": ((3, 2), labels_ignored)},
     lambda t: ops.cross_entropy(t["logits"], t["index"], "out")),
    ("mask_scalar", {"mask": ((3, 4), keep_mask), "x": ((3, 4, 2), normal)},
     lambda t: ops.mask_scalar(t["mask"], -1.5, ops.scale(t["x"], "out", 2.0), batch_ndim=1)),
    ("mask_scalar_read_twice", {"mask": ((4, 3), keep_mask), "x": ((4, 3), normal)},
     lambda t: ops.multiply(ops.mask_scalar(t["mask"], 0.5, ops.gelu(t["x"], "h")),
                            ops.silu(t["x"], "s"), "out")),
]

# case id -> {tensor: tile shape}: the reduced axes cut into uneven tiles
TILES = {
    "permute": {"x": [2, 3, 1]},
    "sumprod_slice": {"x": [2, 1, 2]},
    "sumprod_slice_square": {"x": [2, 2]},
    "sum_slice": {"x": [2, 2]},
    "add_slice": {"x": [2, 2]},
    "multiply_slice": {"x": [2, 1, 2]},
    "multiply_fiber": {"x": [2, 3, 1]},
    "multiply_fiber_batch": {"x": [2, 3, 1]},
    "sumprod_fiber": {"x": [2, 3, 1]},
    "sumprod_fiber_square": {"x": [2, 3]},
    "logsumexp_axis1": {"x": [2, 2, 1]},
    "logsumexp_last": {"x": [2, 2]},
    "softmax_from_logsumexp": {"x": [2, 2, 1]},
    "softmax_from_logsumexp_last": {"x": [2, 2]},
    # attention: head_dim (the scores' K axis) and the key axis (the softmax axis) split
    "sdpa_causal": {"q": [2, 2, 1], "k": [2, 2, 1], "v": [1, 2, 1]},
    "sdpa_causal_structural": {"q": [2, 2, 1], "k": [2, 3, 1], "v": [1, 3, 1]},
    "mask_causal": {"x": [3, 2, 1]},
    "sdpa_heads_no_mask": {"q": [1, 2, 1, 1], "k": [1, 3, 1, 1], "v": [2, 3, 1, 1]},
    # the vocabulary (class axis) and the batch split: vocab-parallel
    "cross_entropy_ignore_index": {"logits": [2, 2, 1]},
}


def build(case_inputs, make_output):
    g = nt.LogicalGraph("autodiff")
    tensors = {name: g.tensor(list(shape), name, DATA_DTYPES[sampler], external=True)
               if sampler in DATA_DTYPES
               else g.tensor(list(shape), name, "fp64", requires_grad=True, persistent=True)
               for name, (shape, sampler) in case_inputs.items()}
    out = make_output(tensors)
    target = g.tensor(list(out.shape), "target", "fp64", external=True)
    loss = ops.mse_loss(out, target, "loss")
    loss.mark_output()
    return g, loss, tensors, target


def case_tiling(case_id):
    if case_id in TILES:
        return nt.TilingStrategy.manual(TILES[case_id])
    return nt.TilingStrategy.auto(target_tile_bytes=48)


def distribution_for(graph, preset):
    """A preset name, or "round_robin": every tensor's tiles dealt over the ranks in
    turn, so the tiles of a reduced axis sit on different ranks."""
    if preset != "round_robin":
        return preset
    return {tensor.name: nt.TileDistribution.round_robin() for tensor in graph.tensors()}


def gradients_and_loss_fn(case_inputs, make_output, values, nranks, preset, tiling):
    g, loss, tensors, target = build(case_inputs, make_output)
    wrt = [tensor for tensor in tensors.values() if tensor.requires_grad]
    grads = nt.grad(g, loss, wrt)
    cg = nt.compile(g, comm=nt.SimulatedWorld(nranks), distribution=distribution_for(g, preset),
                    tiling=tiling)
    cg.bind_data("target", np.asarray(values["target"]))
    for name in tensors:
        cg.bind_data(name, values[name])
    cg.execute()
    analytic = {tensor.name: cg.get_output(grad.name) for tensor, grad in zip(wrt, grads)}

    def loss_at(perturbed):
        for name, array in perturbed.items():
            cg.bind_data(name, array)
        cg.execute(phases=["forward"])
        return float(cg.get_output("loss"))
    return analytic, loss_at


def check_against_finite_differences(case_id, case_inputs, make_output, nranks, preset):
    values = {name: sampler(shape) for name, (shape, sampler) in case_inputs.items()}
    g, *_ = build(case_inputs, make_output)
    target_shape = g.get_tensor("target").shape
    values["target"] = normal(target_shape)
    analytic, loss_at = gradients_and_loss_fn(case_inputs, make_output, values, nranks, preset,
                                              case_tiling(case_id))
    eps = 1e-6
    for name in analytic:
        numeric = np.zeros_like(values[name])
        for index in np.ndindex(values[name].shape):
            plus, minus = values[name].copy(), values[name].copy()
            plus[index] += eps
            minus[index] -= eps
            numeric[index] = (loss_at({name: plus}) - loss_at({name: minus})) / (2 * eps)
        loss_at({name: values[name]})   # the next input is perturbed from these values
        np.testing.assert_allclose(analytic[name], numeric, rtol=1e-6, atol=1e-7,
                                   err_msg=f"{case_id}: d loss / d {name}")


@pytest.mark.parametrize("case_id, case_inputs, make_output", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("nranks, preset", [(1, "single"), (3, "fsdp")])
def test_backward_rule_matches_finite_differences(case_id, case_inputs, make_output,
                                                  nranks, preset):
    check_against_finite_differences(case_id, case_inputs, make_output, nranks, preset)


SPLIT_CASES = [case for case in CASES if case[0] in TILES]


@pytest.mark.parametrize("case_id, case_inputs, make_output", SPLIT_CASES,
                         ids=[c[0] for c in SPLIT_CASES])
def test_backward_rule_with_reduced_axis_tiles_on_different_ranks(case_id, case_inputs,
                                                                  make_output):
    """The TILES cases again with every tensor's tiles dealt round-robin over 3 ranks:
    partial results of the split reductions are merged across ranks."""
    check_against_finite_differences(case_id, case_inputs, make_output, 3, "round_robin")
