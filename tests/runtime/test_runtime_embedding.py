"""Embedding ids through nt.compile/execute with the vocabulary split over 2 tiles (on
1 and 2 simulated ranks): ids of either tile are looked up, an id outside the whole
vocabulary raises an error naming the index tensor and the id, forward and backward."""

import numpy as np
import pytest

import nntile_spmd as nt

E, V, T, B = 3, 10, 4, 2


def embedding_graph(backward):
    g = nt.LogicalGraph("embed")
    ids = g.tensor([T, B], "ids", "int64", external=True)
    if backward:   # dvocab[:, ids] += dy
        dy = g.tensor([E, T, B], "dy", "fp64", external=True)
        dvocab = g.tensor([E, V], "dvocab", "fp64", persistent=True)
        nt.ops.embedding_backward(ids, dy, dvocab)
        dvocab.mark_output()
    else:
        vocab = g.tensor([E, V], "vocab", "fp64", persistent=True)
        nt.ops.embedding(ids, vocab, "y").mark_output()
    return g


def compiled(backward, nranks):
    g = embedding_graph(backward)
    vocab = "dvocab" if backward else "vocab"
    distribution = {vocab: nt.TileDistribution.round_robin()}  # tile 1 on the last rank
    cg = nt.compile(g, comm=nt.SimulatedWorld(nranks), distribution=distribution,
                    tiling=nt.TilingStrategy.manual({vocab: [E, V // 2]}))
    rng = np.random.default_rng(4)
    cg.bind_data(vocab, rng.standard_normal((E, V)))
    if backward:
        cg.bind_data("dy", rng.standard_normal((E, T, B)))
    return cg


IDS = np.array([[0, 4], [5, 9], [3, 7], [9, 0]])   # both tiles, their edges included


@pytest.mark.parametrize("nranks", [1, 2])
def test_ids_of_both_vocab_tiles_are_looked_up(nranks):
    cg = compiled(False, nranks)
    vocab = cg.get_output("vocab")
    cg.bind_data("ids", IDS)
    cg.execute()
    np.testing.assert_array_equal(cg.get_output("y"), vocab[:, IDS])


@pytest.mark.parametrize("nranks", [1, 2])
def test_backward_scatters_into_both_vocab_tiles(nranks):
    cg = compiled(True, nranks)
    before = cg.get_output("dvocab")
    dy = np.random.default_rng(5).standard_normal((E, T, B))
    cg.bind_data("dy", dy)
    cg.bind_data("ids", IDS)
    cg.execute()
    expected = before.copy()
    for t, b in np.ndindex(T, B):
        expected[:, IDS[t, b]] += dy[:, t, b]
    np.testing.assert_allclose(cg.get_output("dvocab"), expected, rtol=1e-12)


@pytest.mark.parametrize("backward", [False, True], ids=["embedding", "embedding_backward"])
@pytest.mark.parametrize("nranks", [1, 2])
@pytest.mark.parametrize("bad_id", [-1, V, V + 7])
def test_an_id_outside_the_vocabulary_raises_naming_index_tensor_and_id(bad_id, nranks,
                                                                        backward):
    cg = compiled(backward, nranks)
    ids = IDS.copy()
    ids[2, 1] = bad_id
    cg.bind_data("ids", ids)
    with pytest.raises(IndexError) as caught:
        cg.execute()
    # the kernel names the id, the executor's note the op and the tiles it reads (ids[...] first)
    message = "\n".join([str(caught.value), *getattr(caught.value, "__notes__", [])])
    for fragment in ("from ids[0,0]", f"holds id {bad_id}", f"outside the vocabulary [0, {V})",
                     "embedding"):
        assert fragment in message, f"{fragment!r} not in {message}"
    cg.bind_data("ids", IDS)      # a good batch after the error runs normally
    cg.execute()
