"""NNTile's flash attention names: flash_sdpa_fwd_cudnn is scaled_dot_product_attention,
and flash_sdpa_bwd_cudnn's gradients match central finite differences of a NumPy
attention (fp64), with and without a mask, on 1 rank and on 3 simulated ranks under
every preset with the key and query axes cut into uneven tiles."""

import numpy as np
import pytest

import nntile_spmd as nt
from nntile_spmd import ops

D, TQ, TK, DV, B = 3, 4, 5, 2, 2
SCALE = 0.7


def attention(q, k, v, mask):
    """out[:, i, b] = v[:, :, b] softmax_j(SCALE * k[:, j, b] . q[:, i, b]) (masked: -inf)."""
    scores = SCALE * np.einsum("djb,dib->jib", k, q)
    if mask is not None:
        scores = np.where(mask[:, :, None], scores, -np.inf)
    probs = np.exp(scores - scores.max(axis=0))
    probs /= probs.sum(axis=0)
    return np.einsum("ejb,jib->eib", v, probs)


def numeric_grad(f, array, eps=1e-6):
    grad = np.zeros_like(array)
    for index in np.ndindex(array.shape):
        plus, minus = array.copy(), array.copy()
        plus[index] += eps
        minus[index] -= eps
        grad[index] = (f(plus) - f(minus)) / (2 * eps)
    return grad


def test_forward_name_is_the_attention_builder():
    assert ops.flash_sdpa_fwd_cudnn is ops.scaled_dot_product_attention


@pytest.mark.parametrize("masked", [False, True], ids=["nomask", "mask"])
@pytest.mark.parametrize("ranks, preset", [(1, "single"), (3, "single"), (3, "ddp"),
                                           (3, "fsdp"), (3, "tp")])
def test_backward_matches_finite_differences(ranks, preset, masked):
    g = nt.LogicalGraph("flash")
    shapes = {"q": (D, TQ, B), "k": (D, TK, B), "v": (DV, TK, B), "dout": (DV, TQ, B)}
    t = {name: g.tensor(list(shape), name, "fp64", external=True)
         for name, shape in shapes.items()}
    grads = {name: g.tensor(list(shapes[name]), f"d{name}", "fp64", persistent=True)
             for name in ("q", "k", "v")}
    mask = g.tensor([TK, TQ], "mask", "bool", external=True) if masked else None
    ops.flash_sdpa_bwd_cudnn(t["q"], t["k"], t["v"], t["dout"], grads["q"], grads["k"],
                             grads["v"], "attn", mask=mask, scale=SCALE)
    tiling = nt.TilingStrategy.manual({"q": [2, 3, 1], "k": [2, 2, 1]}) if ranks > 1 else None
    cg = nt.compile(g, comm=nt.SimulatedWorld(ranks), distribution=preset, tiling=tiling)
    rng = np.random.default_rng(4)
    values = {name: rng.standard_normal(shape) for name, shape in shapes.items()}
    mask_values = None
    if masked:
        mask_values = np.tril(np.ones((TK, TQ), dtype=bool), k=1)   # a causal-like mask
        cg.bind_data("mask", mask_values)
    for name, value in values.items():
        cg.bind_data(name, value)
    before = {name: rng.standard_normal(shapes[name]) for name in grads}
    for name, value in before.items():   # the gradients accumulate into what is there
        cg.bind_data(f"d{name}", value)
    cg.execute()
    for name in grads:
        def loss(array, name=name):
            args = dict(values, **{name: array})
            return float((attention(args["q"], args["k"], args["v"], mask_values)
                          * values["dout"]).sum())
        expected = before[name] + numeric_grad(loss, values[name])
        np.testing.assert_allclose(cg.get_output(f"d{name}"), expected, rtol=1e-6, atol=1e-7,
                                   err_msg=f"d{name}")


def test_backward_errors_name_the_op_and_the_tensors():
    g = nt.LogicalGraph("bad")
    q, k, v = (g.tensor([D, n, B], name, "fp64") for name, n in (("q", TQ), ("k", TK),
                                                                   ("v", TK)))
    dout = g.tensor([D, TQ, B], "dout", "fp64")
    dq, dk, dv = (g.tensor(list(t.shape), f"d{t.name}", "fp64") for t in (q, k, v))
    with pytest.raises(ValueError, match=r"flash_sdpa_bwd_cudnn: dq must have shape "
                                         r"\[3, 5, 2\] \(that of k\)"):
        ops.flash_sdpa_bwd_cudnn(q, k, v, dout, dq, dq, dv, "a")
    with pytest.raises(TypeError, match="flash_sdpa_bwd_cudnn: d32 must have q's dtype"):
        ops.flash_sdpa_bwd_cudnn(q, k, v, dout, g.tensor([D, TQ, B], "d32", "fp32"), dk, dv,
                                 "a")
    assert len(g.ops()) == 0
