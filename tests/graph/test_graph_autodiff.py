"""Every backward rule of nt.grad against central finite differences (fp64), on one
rank and on 3 simulated ranks under FSDP (the emitted ops are ordinary ops)."""

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


def is_index(sampler):
    return sampler is labels


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
    ("copy", {"x": ((3, 4), normal)}, lambda t: ops.copy(t["x"], "out")),
    ("softmax_axis0", {"x": ((4, 3), normal)}, lambda t: ops.softmax(t["x"], "out", 0)),
    ("softmax_axis1", {"x": ((3, 4), normal)}, lambda t: ops.softmax(t["x"], "out", 1)),
    ("embedding", {"index": ((2, 3), labels), "vocab": ((3, 4), normal)},
     lambda t: ops.embedding(t["index"], t["vocab"], "out", axis=1)),
    ("cross_entropy", {"logits": ((4, 5), normal), "index": ((5,), labels)},
     lambda t: ops.cross_entropy_loss(t["logits"], t["index"], "out", 0.2)),
    ("mse_both_sides", {"x": ((3, 4), normal), "y": ((3, 4), normal)},
     lambda t: ops.mse_loss(t["x"], t["y"], "out", 0.5)),
]


def build(case_inputs, make_output):
    g = nt.LogicalGraph("autodiff")
    tensors = {name: g.tensor(list(shape), name, "int64", external=True) if is_index(sampler)
               else g.tensor(list(shape), name, "fp64", requires_grad=True, persistent=True)
               for name, (shape, sampler) in case_inputs.items()}
    out = make_output(tensors)
    target = g.tensor(list(out.shape), "target", "fp64", external=True)
    loss = ops.mse_loss(out, target, "loss")
    loss.mark_output()
    return g, loss, tensors, target


def gradients_and_loss_fn(case_inputs, make_output, values, nranks, preset):
    g, loss, tensors, target = build(case_inputs, make_output)
    wrt = [tensor for tensor in tensors.values() if tensor.requires_grad]
    grads = nt.grad(g, loss, wrt)
    cg = nt.compile(g, comm=nt.SimulatedWorld(nranks), distribution=preset,
                    tiling=nt.TilingStrategy.auto(target_tile_bytes=48))
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


@pytest.mark.parametrize("case_id, case_inputs, make_output", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("nranks, preset", [(1, "single"), (3, "fsdp")])
def test_backward_rule_matches_finite_differences(case_id, case_inputs, make_output,
                                                  nranks, preset):
    values = {name: sampler(shape) for name, (shape, sampler) in case_inputs.items()}
    g, *_ = build(case_inputs, make_output)
    target_shape = g.get_tensor("target").shape
    values["target"] = normal(target_shape)
    analytic, loss_at = gradients_and_loss_fn(case_inputs, make_output, values, nranks, preset)
    eps = 1e-6
    for name in analytic:
        numeric = np.zeros_like(values[name])
        for index in np.ndindex(values[name].shape):
            plus, minus = values[name].copy(), values[name].copy()
            plus[index] += eps
            minus[index] -= eps
            numeric[index] = (loss_at({name: plus}) - loss_at({name: minus})) / (2 * eps)
            loss_at({name: values[name]})
        np.testing.assert_allclose(analytic[name], numeric, rtol=1e-6, atol=1e-7,
                                   err_msg=f"{case_id}: d loss / d {name}")
