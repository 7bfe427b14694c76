"""GPT-2 on 4 simulated ranks under dp x tp and fsdp x tp meshes, in fp64: logits, loss
and every gradient match transformers (the parity contract's tolerances) and one rank
(1e-12 relative), with the planner's tiles and with tiles smaller than a head, the
vocabulary and the sequence; with deterministic=True they equal one rank's bitwise.
Real MPI ranks: tests/models/test_gpt2_mesh_mpi.py."""

import numpy as np
import pytest
from gpt2_helpers import BATCH, SEQ, SMALL_TILES, hf_reference, parity_problems, run_ours

import nntile_spmd as nt
from nntile_spmd.models import gpt2

MESHES = [{"dp": 2, "tp": 2}, {"fsdp": 2, "tp": 2}]
IDS = ["dp2xtp2", "fsdp2xtp2"]


@pytest.fixture(scope="module")
def reference():
    return hf_reference()


def results(model, cg) -> dict:
    return {"logits": cg.get_output("logits"), "loss": cg.get_output("loss"),
            **model.hf_grads(cg)}


@pytest.fixture(scope="module")
def one_rank(reference):
    config, state, ids, targets, _ = reference
    return {tiles: results(*run_ours(config, state, ids, targets, nt.SimulatedWorld(1),
                                     "single", SMALL_TILES if tiles else None))
            for tiles in (False, True)}


@pytest.mark.parametrize("tiles", [False, True], ids=["auto", "small"])
@pytest.mark.parametrize("mesh", MESHES, ids=IDS)
def test_parity_with_transformers_and_one_rank(reference, one_rank, mesh, tiles):
    config, state, ids, targets, hf = reference
    model, cg = run_ours(config, state, ids, targets, nt.SimulatedWorld(4), mesh,
                         SMALL_TILES if tiles else None)
    assert parity_problems(model, cg, hf) == []
    ours, single = results(model, cg), one_rank[tiles]
    for name, value in single.items():
        scale = max(np.abs(value).max(), 1e-30)
        assert np.abs(ours[name] - value).max() / scale < 1e-12, name
    cg.check_stats()
    assert cg.estimate_communication() > 0


@pytest.mark.parametrize("mesh", MESHES, ids=IDS)
def test_deterministic_mesh_is_bitwise_one_rank(reference, mesh):
    config, state, ids, targets, _ = reference

    def run(ranks, distribution):
        model = gpt2.build_gpt2(config, batch=BATCH, seq=SEQ, dtype="fp64")
        cg = nt.compile(model.graph, comm=nt.SimulatedWorld(ranks), distribution=distribution,
                        tiling=nt.TilingStrategy.manual(SMALL_TILES), deterministic=True)
        model.load_hf_state_dict(cg, state)
        cg.bind_data("input_ids", ids)
        cg.bind_data("targets", targets)
        cg.execute()
        return results(model, cg)

    single, ours = run(1, "single"), run(4, mesh)
    assert [name for name in single if not np.array_equal(ours[name], single[name])] == []


def test_carried_embedding_gradient_matches_one_rank():
    """A GPT-2 whose embedding gradient, on 3 x 2 dp x tp, adds each row's sequence
    gradient into the logits gemm's carried partials (plan/accumulate.py
    carried_choice; tests/plan/test_mesh_sends.py checks that it does) computes every
    gradient as one rank does (1e-12 of the largest: the sums run in another order)."""
    cfg = gpt2.GPT2Config(vocab_size=101, n_positions=16, n_embd=12, n_layer=1, n_head=3)

    def run(ranks, distribution):
        model = gpt2.build_gpt2(cfg, batch=3, seq=16, dtype="fp64")
        cg = nt.compile(model.graph, comm=nt.SimulatedWorld(ranks), distribution=distribution,
                        tiling=nt.TilingStrategy.auto(target_tile_bytes=400))
        rng = np.random.default_rng(5)
        for name, value in model.init_params(rng).items():
            cg.bind_data(name, value)
        ids = rng.integers(0, cfg.vocab_size, (16, 3))
        cg.bind_data("input_ids", np.asfortranarray(ids))
        cg.bind_data("targets", np.asfortranarray(np.roll(ids, -1, axis=0)))
        cg.execute()
        return {grad.name: cg.get_output(grad.name) for grad in model.grads}

    single, ours = run(1, "single"), run(6, {"dp": 3, "tp": 2})
    # against the largest gradient: the key bias's is zero up to rounding (softmax)
    scale = max(np.abs(value).max() for value in single.values())
    for name, value in single.items():
        assert np.abs(ours[name] - value).max() / scale < 1e-12, name
