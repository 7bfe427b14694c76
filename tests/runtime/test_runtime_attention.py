"""scaled_dot_product_attention against a one-process NumPy causal attention, with the
sequence axes and head_dim split into uneven tiles, on 1 and 3 simulated ranks under
every preset and with every tensor's tiles dealt round-robin (key tiles on different
ranks). The MPI twin is in test_runtime_attention_loss_mpi.py.
"""

import numpy as np
import pytest
from helpers import stat_problems

import nntile_spmd as nt

D, T, B, H = 5, 7, 2, 3          # head_dim, sequence, batch, heads
TILES = {"q": [2, 3, 1, 2], "k": [2, 3, 1, 2], "v": [2, 3, 1, 2]}   # uneven: 2,2,1 / 3,3,1
DISTRIBUTIONS = ["single", "ddp", "fsdp", "tp", "round_robin"]


def softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def numpy_attention(q, k, v, keep, scale):
    """q, k, v [d, T, batch...], keep [Tk, Tq] -> [d_v, Tq, batch...]."""
    scores = scale * np.einsum("dk...,dq...->kq...", k, q)
    keep = keep.reshape(keep.shape + (1,) * (scores.ndim - 2))
    probs = softmax(np.where(keep, scores, -np.inf), axis=0)
    return np.einsum("ek...,kq...->eq...", v, probs)


def causal(length):
    """[key, query]: key <= query is kept (what GPT-2 passes)."""
    return np.arange(length)[:, None] <= np.arange(length)[None, :]


def attention_graph():
    g = nt.LogicalGraph("attention")
    q, k, v = (g.tensor([D, T, B, H], name, "fp64", external=True) for name in "qkv")
    mask = g.tensor([T, T], "mask", "bool", external=True)
    nt.ops.scaled_dot_product_attention(q, k, v, "out", mask=mask).mark_output()
    return g


def distribution_of(graph, name):
    if name != "round_robin":
        return name
    return {t.name: nt.TileDistribution.round_robin() for t in graph.tensors()}


def run_attention(comm, distribution, seed=0):
    """Compile and run on `comm`; return (problems, compiled graph)."""
    g = attention_graph()
    cg = nt.compile(g, comm=comm, tiling=nt.TilingStrategy.manual(TILES),
                    distribution=distribution_of(g, distribution), recv_timeout=60.0)
    rng = np.random.default_rng(seed)
    arrays = {name: np.asfortranarray(rng.standard_normal((D, T, B, H))) for name in "qkv"}
    arrays["mask"] = np.asfortranarray(causal(T))
    for name, array in arrays.items():
        cg.bind_data(name, array)
    cg.execute()
    expected = numpy_attention(arrays["q"], arrays["k"], arrays["v"], arrays["mask"],
                               1 / np.sqrt(D))
    got = cg.get_output("out")
    problems = stat_problems(cg)
    if not np.allclose(got, expected, rtol=1e-12, atol=1e-12):
        problems.append(f"out differs from NumPy by {np.max(np.abs(got - expected))}")
    return problems, cg


@pytest.mark.parametrize("distribution", DISTRIBUTIONS)
@pytest.mark.parametrize("nranks", [1, 3])
def test_causal_attention_matches_numpy(nranks, distribution):
    problems, cg = run_attention(nt.SimulatedWorld(nranks), distribution)
    assert not problems, problems
    # the key axis really is cut: the softmax runs over several key tiles
    assert cg.plan.tilings["out_scores"].grid[:2] == (3, 3)
    assert cg.plan.tilings["q"].grid[0] == 3


def test_key_tiles_on_different_ranks_merge_by_logaddexp():
    _, cg = run_attention(nt.SimulatedWorld(3), "round_robin")
    merges = [line for rank in range(3) for line in cg.program(rank).splitlines()
              if line.startswith("EXEC logsumexp_merge")]
    assert merges, "no partial logsumexp crossed ranks"


def test_attention_matches_torch_when_available():
    """The same forward against torch's own scaled_dot_product_attention (fp64)."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    q, k, v = (rng.standard_normal((D, T, B, H)) for _ in range(3))
    # torch: [B, H, T, D], attn_mask [Tq, Tk] True = attend
    as_torch = [torch.from_numpy(np.ascontiguousarray(a.transpose(2, 3, 1, 0))) for a in (q, k, v)]
    expected = torch.nn.functional.scaled_dot_product_attention(*as_torch, is_causal=True)
    expected = expected.numpy().transpose(3, 2, 0, 1)
    np.testing.assert_allclose(numpy_attention(q, k, v, causal(T), 1 / np.sqrt(D)), expected,
                               rtol=1e-12, atol=1e-12)
