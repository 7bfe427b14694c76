"""cross_entropy (mean over labels != ignore_index) and its gradient against NumPy and,
when torch imports, torch.nn.functional.cross_entropy(ignore_index=-100) in fp64, with
the vocabulary split into uneven tiles over 1 and 3 simulated ranks (vocab-parallel).
The MPI twin is in test_runtime_attention_loss_mpi.py.
"""

import numpy as np
import pytest
from helpers import stat_problems

import nntile_spmd as nt

V, T, B = 11, 5, 2
TILES = {"logits": [3, 2, 1]}    # vocab tiles 3,3,3,2; sequence tiles 2,2,1
DISTRIBUTIONS = ["single", "ddp", "fsdp", "tp", "round_robin"]


def make_labels(rng, ignored_fraction=0.3):
    labels = rng.integers(0, V, (T, B))
    labels[rng.random((T, B)) < ignored_fraction] = -100
    labels[0, 0] = V - 1              # the last class, in the last (short) vocab tile
    return np.asfortranarray(labels)


def numpy_cross_entropy(logits, labels):
    """(mean loss over labels != -100, d loss / d logits) of logits [V, T, B]."""
    top = logits.max(axis=0)
    lse = top + np.log(np.exp(logits - top).sum(axis=0))
    valid = labels != -100
    safe = np.where(valid, labels, 0)
    picked = np.take_along_axis(logits, safe[None], axis=0)[0]
    count = valid.sum()
    with np.errstate(invalid="ignore", divide="ignore"):
        loss = np.where(valid, lse - picked, 0).sum() / count
        onehot = np.arange(V)[:, None, None] == safe[None]
        grad = np.where(valid, 1.0 / count, 0) * (np.exp(logits - lse) - onehot)
    return loss, grad


def cross_entropy_graph():
    g = nt.LogicalGraph("loss")
    logits = g.tensor([V, T, B], "logits", "fp64", requires_grad=True, persistent=True)
    targets = g.tensor([T, B], "targets", "int64", external=True)
    loss = nt.ops.cross_entropy(logits, targets, "loss", ignore_index=-100)
    loss.mark_output()
    (grad,) = nt.grad(g, loss, [logits], accumulate=False)
    return g, grad


def distribution_of(graph, name):
    if name != "round_robin":
        return name
    return {t.name: nt.TileDistribution.round_robin() for t in graph.tensors()}


def run_cross_entropy(comm, distribution, logits, labels):
    """(loss, dlogits, problems with the plan's statistics)."""
    g, grad = cross_entropy_graph()
    cg = nt.compile(g, comm=comm, tiling=nt.TilingStrategy.manual(TILES),
                    distribution=distribution_of(g, distribution), recv_timeout=60.0)
    cg.bind_data("logits", logits)
    cg.bind_data("targets", labels)
    cg.execute()
    return cg.get_output("loss"), cg.get_output(grad.name), stat_problems(cg)


def check_against_numpy(comm, distribution, seed=0):
    rng = np.random.default_rng(seed)
    logits = np.asfortranarray(3.0 * rng.standard_normal((V, T, B)))
    labels = make_labels(rng)
    loss, grad, problems = run_cross_entropy(comm, distribution, logits, labels)
    want_loss, want_grad = numpy_cross_entropy(logits, labels)
    if not np.allclose(loss, want_loss, rtol=1e-12, atol=0):
        problems.append(f"loss {loss} != {want_loss}")
    if not np.allclose(grad, want_grad, rtol=1e-10, atol=1e-14):
        problems.append(f"dlogits off by {np.max(np.abs(grad - want_grad))}")
    return problems


@pytest.mark.parametrize("distribution", DISTRIBUTIONS)
@pytest.mark.parametrize("nranks", [1, 3])
def test_cross_entropy_and_gradient_match_numpy(nranks, distribution):
    problems = check_against_numpy(nt.SimulatedWorld(nranks), distribution)
    assert not problems, problems


def test_cross_entropy_matches_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(7)
    logits = np.asfortranarray(2.0 * rng.standard_normal((V, T, B)))
    labels = make_labels(rng)
    loss, grad, problems = run_cross_entropy(nt.SimulatedWorld(3), "round_robin", logits, labels)
    assert not problems, problems
    # torch: input [N, C], target [N]; N runs over (T, B) in the same (C) order for both
    flat = torch.tensor(logits.reshape(V, -1).T.copy(), dtype=torch.float64, requires_grad=True)
    target = torch.tensor(labels.reshape(-1))
    want = torch.nn.functional.cross_entropy(flat, target, ignore_index=-100)
    want.backward()
    np.testing.assert_allclose(loss, want.item(), rtol=1e-12)
    np.testing.assert_allclose(grad, flat.grad.numpy().T.reshape(V, T, B), rtol=1e-10,
                               atol=1e-15)


def test_all_labels_ignored_gives_nan_as_torch_does():
    logits = np.asfortranarray(np.random.default_rng(1).standard_normal((V, T, B)))
    labels = np.full((T, B), -100, order="F")
    loss, grad, problems = run_cross_entropy(nt.SimulatedWorld(3), "fsdp", logits, labels)
    assert not problems, problems
    assert np.isnan(loss)
    assert not grad.any()            # no position is valid: nothing flows back


@pytest.mark.parametrize("bad", [V, 13, -3])
@pytest.mark.parametrize("nranks", [1, 3])
def test_label_outside_the_vocabulary_raises_naming_tensor_and_value(nranks, bad):
    logits = np.asfortranarray(np.zeros((V, T, B)))
    labels = make_labels(np.random.default_rng(2))
    labels[3, 1] = bad
    with pytest.raises(IndexError) as caught:
        run_cross_entropy(nt.SimulatedWorld(nranks), "round_robin", logits, labels)
    message = str(caught.value) + "".join(getattr(caught.value, "__notes__", []))
    assert f"labels hold {bad}, outside the class range [0, {V})" in message, message
    assert "not ignore_index -100" in message
    if hasattr(caught.value, "add_note"):   # the executor names the op's tiles
        assert "targets[" in message and "cross_entropy_lse" in message, message
