"""nt.ops.cross_entropy_soft: cross-entropy with probability targets and label smoothing
(a composite of ordinary ops), against NumPy's closed forms on 1 and 3 simulated ranks
with the class axis split unevenly, and one-hot targets against cross_entropy's labels."""

import numpy as np
import pytest

import nntile_spmd as nt

V, B, T = 7, 3, 2


def numpy_soft(x, t, eps):
    """(loss, d loss / d x) with t' = (1 - eps) t + eps / V, classes on axis 0."""
    t = (1 - eps) * t + eps / x.shape[0]
    shifted = x - x.max(axis=0)
    log_softmax = shifted - np.log(np.exp(shifted).sum(axis=0))
    samples = x[0].size
    loss = -(t * log_softmax).sum() / samples
    return loss, (np.exp(log_softmax) * t.sum(axis=0) - t) / samples


def soft_loss_run(x, t, eps, ranks, tiles):
    g = nt.LogicalGraph("soft")
    logits = g.tensor([V, B, T], "x", "fp64", requires_grad=True, persistent=True)
    targets = g.tensor([V, B, T], "t", "fp64", external=True)
    loss = g.cross_entropy_soft(logits, targets, label_smoothing=eps, name="loss")
    loss.mark_output()
    (dx,) = nt.grad(g, loss, [logits])
    cg = nt.compile(g, comm=nt.SimulatedWorld(ranks), distribution="fsdp",
                    tiling=nt.TilingStrategy.manual({"x": tiles}))
    cg.bind_data("x", x)
    cg.bind_data("t", t)
    cg.execute()
    return float(cg.get_output("loss")), cg.get_output(dx.name)


@pytest.mark.parametrize("eps", [0.0, 0.1])
@pytest.mark.parametrize("ranks, tiles", [(1, [7, 3, 2]), (3, [3, 2, 1])])
def test_soft_targets_match_numpy(eps, ranks, tiles):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((V, B, T))
    t = rng.random((V, B, T))
    t /= t.sum(axis=0)
    loss, grad = soft_loss_run(x, t, eps, ranks, tiles)
    want_loss, want_grad = numpy_soft(x, t, eps)
    assert loss == pytest.approx(want_loss, rel=1e-12)
    np.testing.assert_allclose(grad, want_grad, rtol=1e-12, atol=1e-15)


def test_one_hot_targets_give_cross_entropy_of_the_labels():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((V, B, T))
    labels = rng.integers(0, V, (B, T))
    one_hot = np.moveaxis(np.eye(V)[labels], -1, 0)
    soft, _ = soft_loss_run(x, one_hot, 0.0, 2, [4, 2, 2])
    g = nt.LogicalGraph("hard")
    logits = g.tensor([V, B, T], "x", "fp64", external=True)
    index = g.tensor([B, T], "labels", "int64", external=True)
    nt.ops.cross_entropy(logits, index, "loss").mark_output()
    cg = nt.compile(g, comm=nt.SimulatedWorld(1))
    cg.bind_data("x", x)
    cg.bind_data("labels", labels)
    cg.execute()
    assert soft == pytest.approx(float(cg.get_output("loss")), rel=1e-12)


def test_bad_targets_are_refused_before_any_op():
    g = nt.LogicalGraph("bad")
    logits = g.tensor([V, B], "x", "fp64")
    with pytest.raises(ValueError, match="must have the shape of x"):
        nt.ops.cross_entropy_soft(logits, g.tensor([V, B + 1], "t", "fp64"), "loss")
    with pytest.raises(TypeError, match="dtypes differ"):
        nt.ops.cross_entropy_soft(logits, g.tensor([V, B], "t32", "fp32"), "loss")
    with pytest.raises(ValueError, match="label_smoothing"):
        nt.ops.cross_entropy_soft(logits, g.tensor([V, B], "t2", "fp64"), "loss", 1.5)
    assert g.num_operations() == 0
