"""deterministic=True on GPT-2 (attention, layer norm, cross-entropy over a split
vocabulary): with one tile grid, the loss, logits and every gradient are bitwise
those of one rank, on 2 and 3 simulated ranks under every preset."""

import numpy as np
import pytest
from gpt2_helpers import BATCH, SEQ, SMALL_TILES, hf_reference

import nntile_spmd as nt
from nntile_spmd.models import gpt2


@pytest.fixture(scope="module")
def reference():
    return hf_reference()


def run(reference, ranks, preset) -> dict:
    config, state, ids, targets, _ = reference
    model = gpt2.build_gpt2(config, batch=BATCH, seq=SEQ, dtype="fp64")
    cg = nt.compile(model.graph, comm=nt.SimulatedWorld(ranks), distribution=preset,
                    tiling=nt.TilingStrategy.manual(SMALL_TILES), deterministic=True)
    model.load_hf_state_dict(cg, state)
    cg.bind_data("input_ids", ids)
    cg.bind_data("targets", targets)
    cg.execute()
    names = ["loss", "logits"] + [t.name for t in model.graph.tensors()
                                  if t.persistent and "grad" in t.name]
    return {name: cg.get_output(name) for name in names}


@pytest.fixture(scope="module")
def one_rank(reference):
    return run(reference, 1, "single")


@pytest.mark.parametrize("preset", ["ddp", "fsdp", "tp"])
@pytest.mark.parametrize("ranks", [2, 3])
def test_bitwise_equal_to_one_rank(reference, one_rank, ranks, preset):
    result = run(reference, ranks, preset)
    assert len(result) > 30
    assert [name for name in result if not np.array_equal(result[name], one_rank[name])] == []
