"""GPT-2 under pipeline parallelism on simulated ranks, in fp64: the `pp` preset on 2
and 3 stages with uneven blocks per stage (3 blocks: 2 + 1, 5 blocks: 2 + 2 + 1),
dp x pp and fsdp x pp on 4 ranks, GPipe and 1F1B, give one rank's logits, loss and
gradients (1e-12 of each
tensor's scale), with every rank's measured traffic, FLOPs and peak bytes equal to
the plan's; the 2-block model of the parity tests matches transformers under pp and
dp x pp. Real MPI ranks: tests/models/test_gpt2_pipeline_mpi.py."""

import numpy as np
import pytest
from gpt2_helpers import SMALL_TILES, hf_reference, parity_problems, run_ours

import nntile_spmd as nt
from nntile_spmd.models import gpt2

VOCAB, BATCH, SEQ = 23, 3, 5
TILES = {"h_in": [5, 3, 1], "logits": [10, 3, 1]}   # 3 micro-batches; n_embd 8 as 5 + 3


def run(comm, distribution, n_layer):
    """{output or gradient name: value} of one fp64 step of a fresh GPT-2, and its cg."""
    config = gpt2.GPT2Config(vocab_size=VOCAB, n_positions=8, n_embd=8, n_layer=n_layer,
                             n_head=2)
    model = gpt2.build_gpt2(config, batch=BATCH, seq=SEQ, dtype="fp64")
    rng = np.random.default_rng(0)
    params = model.init_params(rng)
    ids = rng.integers(0, VOCAB, (SEQ, BATCH)).astype(np.int64)
    targets = rng.integers(0, VOCAB, (SEQ, BATCH)).astype(np.int64)
    targets[1, 0] = -100
    cg = nt.compile(model.graph, comm=comm, distribution=distribution,
                    tiling=nt.TilingStrategy.manual(TILES))
    for name, value in params.items():
        cg.bind_data(name, value)
    cg.bind_data("input_ids", ids)
    cg.bind_data("targets", targets)
    cg.execute()
    names = ["loss", "logits"] + [g.name for g in model.grads]
    return {name: cg.get_output(name) for name in names}, cg


def differences(ours, single) -> list:
    """Names whose values differ by more than 1e-12 of the largest value: the key bias
    gradients are zero up to rounding (softmax ignores a shift), so the tolerance is
    relative to the largest gradient, not to each tensor."""
    scale = max(np.abs(value).max() for value in single.values())
    return [name for name, value in single.items()
            if not np.abs(ours[name] - value).max() <= 1e-12 * scale]


@pytest.mark.parametrize("n_layer,ranks,distribution", [
    (3, 2, "pp"), (5, 3, "pp"), (3, 4, {"dp": 2, "pp": 2}), (3, 4, {"pp": 2, "fsdp": 2}),
    (5, 3, {"pp": 3, "schedule": "1f1b"}), (3, 4, {"dp": 2, "pp": 2, "schedule": "1f1b"})],
    ids=["pp2-3blocks", "pp3-5blocks", "dp2xpp2", "pp2xfsdp2", "pp3-1f1b", "dp2xpp2-1f1b"])
def test_pipeline_is_one_rank(n_layer, ranks, distribution):
    single, _ = run(nt.SimulatedWorld(1), "single", n_layer)
    ours, cg = run(nt.SimulatedWorld(ranks), distribution, n_layer)
    assert differences(ours, single) == []
    for rank in range(ranks):   # traffic, FLOPs and peak (stashed activations) as planned
        cg.check_stats(rank)
    stages = {tuple(cg.plan.ranks_of_owner(int(cg.plan.owners[f"h{block}_fc_weight"][0, 0])))
              for block in range(n_layer)}
    assert len(stages) == (3 if ranks == 3 else 2)   # each stage holds its own blocks


@pytest.mark.parametrize("distribution,ranks", [("pp", 2), ({"dp": 2, "pp": 2}, 4)],
                         ids=["pp2", "dp2xpp2"])
def test_parity_with_transformers(distribution, ranks):
    config, state, ids, targets, hf = hf_reference()
    model, cg = run_ours(config, state, ids, targets, nt.SimulatedWorld(ranks), distribution,
                         SMALL_TILES)
    assert parity_problems(model, cg, hf) == []
    cg.check_stats()
