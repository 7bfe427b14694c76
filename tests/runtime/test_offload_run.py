"""Planned offloading at run time (plan/offload.py, runtime/offload_store.py): under a
memory budget per rank, fp64 MLP and GPT-2 training steps (AdamW, so parameters,
gradients and optimizer state are all persistent) give bitwise the results of the
same plan without offloading, on 1 and 3 simulated ranks, under every preset, with
the serial and the threaded executor; each rank's measured peak equals the planned
one and stays within the budget; the measured bytes evicted and prefetched equal
the plan's; the memory-mapped files live in a per-rank directory that is removed."""

import gc
import os

import numpy as np
import pytest

import nntile_spmd as nt
from nntile_spmd.models import gpt2, mlp
from nntile_spmd.plan.offload import offload_totals
from nntile_spmd.train import add_optimizer

PRESETS = [(1, "single"), (3, "ddp"), (3, "fsdp"), (3, "tp")]
IDS = ["1-single", "3-ddp", "3-fsdp", "3-tp"]


def mlp_case():
    sizes = [20, 30, 10]
    model = mlp.build_mlp(sizes, batch=12, dtype="fp64")
    add_optimizer(model.graph, model.params, model.grads, "adamw", lr=1e-2, weight_decay=0.01)
    rng = np.random.default_rng(0)
    data = {**mlp.init_linear_params(sizes, rng, "fp64"), "x": rng.normal(size=(20, 12)),
            "y": rng.integers(0, 10, 12)}
    tiling = nt.TilingStrategy.manual({"x": [7, 5], "h1": [11, 5]})   # uneven tiles
    return model, data, tiling, ["loss"]


def gpt2_case():
    cfg = gpt2.GPT2Config(vocab_size=32, n_positions=12, n_embd=16, n_layer=2, n_head=2)
    model = gpt2.build_gpt2(cfg, batch=3, seq=7, dtype="fp64")
    add_optimizer(model.graph, model.params, model.grads, "adamw", lr=1e-3, weight_decay=0.01)
    rng = np.random.default_rng(1)
    ids = np.asfortranarray(rng.integers(0, 32, (7, 3)))
    data = {**model.init_params(rng), "input_ids": ids, "targets": ids}
    tiling = nt.TilingStrategy.manual({"input_ids": [5, 2], "logits": [10, 5, 2]})
    return model, data, tiling, ["loss", "logits"]


def run(case, ranks, distribution, task_threads=1, steps=2, **offload):
    model, data, tiling, outputs = case
    cg = nt.compile(model.graph, comm=nt.SimulatedWorld(ranks), distribution=distribution,
                    tiling=tiling, task_threads=task_threads, **offload)
    for name, value in data.items():
        cg.bind_data(name, value)
    for _ in range(steps):
        cg.execute()
        cg.check_stats()   # measured peak, traffic and FLOPs equal the plan's, per rank
    names = [p.name for p in model.params]
    if steps:
        names += outputs + [g.name for g in model.grads]
    return cg, {name: cg.get_output(name) for name in names}


def check_offloaded(case, ranks, distribution, fraction, task_threads=1):
    plain, expected = run(case, ranks, distribution)
    peaks = [plain.memory_on_rank(rank) for rank in range(ranks)]
    budget = int(max(peaks) * fraction)
    cg, values = run(case, ranks, distribution, task_threads, memory_budget=budget)
    assert [name for name in expected if not np.array_equal(expected[name], values[name])] == []
    moved = 0
    for rank in range(ranks):
        stats = cg.get_stats(rank)
        assert stats.peak_bytes == cg.memory_on_rank(rank) <= budget
        evicted, prefetched = offload_totals(cg.plan.program(rank))
        assert (stats.bytes_evicted, stats.bytes_prefetched) == (evicted, prefetched)
        moved += prefetched
    assert moved > 0      # the budget really made the plan offload
    return cg, budget


@pytest.mark.parametrize("ranks,distribution", PRESETS, ids=IDS)
@pytest.mark.parametrize("task_threads", [1, 2], ids=["serial", "threaded"])
def test_mlp_adamw_is_bitwise_unchanged_within_the_budget(ranks, distribution, task_threads):
    check_offloaded(mlp_case(), ranks, distribution, 0.5, task_threads)


@pytest.mark.parametrize("ranks,distribution", PRESETS + [(4, {"fsdp": 2, "tp": 2})],
                         ids=IDS + ["4-fsdp2xtp2"])
def test_gpt2_adamw_is_bitwise_unchanged_within_the_budget(ranks, distribution):
    check_offloaded(gpt2_case(), ranks, distribution, 0.6)


def test_gpt2_threaded_tight_budget():
    cg, budget = check_offloaded(gpt2_case(), 3, "fsdp", 0.35, task_threads=2)
    assert "offloading: budget" in cg.dump_plan()


def test_memory_mapped_files_are_per_rank_and_removed(tmp_path, monkeypatch):
    monkeypatch.setenv("NNTILE_SPMD_OFFLOAD_DIR", str(tmp_path))
    case = mlp_case()
    plain, _ = run(case, 2, "fsdp", steps=1)
    budget = int(max(plain.memory_on_rank(r) for r in range(2)) * 0.5)
    cg, _ = run(case, 2, "fsdp", steps=1, memory_budget=budget)
    directories = sorted(os.listdir(tmp_path))
    assert [name.split("-")[2] for name in directories] == ["rank0", "rank1"]
    assert all(os.listdir(tmp_path / name) for name in directories)   # arena files
    del cg
    gc.collect()
    assert os.listdir(tmp_path) == []


def test_bind_and_get_output_reach_tiles_that_rest_offloaded():
    """Persistent tiles kept offloaded between executes (here AdamW's state) are bound
    and read in their memory-mapped slots."""
    case = mlp_case()
    plain, _ = run(case, 1, "single", steps=0)
    budget = int(plain.memory_on_rank(0) * 0.3)
    cg, _ = run(case, 1, "single", steps=0, memory_budget=budget)
    resting = sorted({name for name, _ in cg.stores[0].offload.copies})
    assert "w1_m" in resting
    value = np.random.default_rng(3).normal(size=(30, 20))
    cg.bind_data("w1_m", value)
    assert np.array_equal(cg.get_output("w1_m"), value)
    assert cg.stores[0].nbytes <= budget      # nothing was brought into device memory


def test_compile_async_plans_the_same_offloading():
    model, _, tiling, _ = mlp_case()
    plain = nt.compile(model.graph, comm=nt.SimulatedWorld(2), distribution="fsdp",
                       tiling=tiling)
    budget = int(max(plain.memory_on_rank(rank) for rank in range(2)) * 0.5)
    now = nt.compile(model.graph, comm=nt.SimulatedWorld(2), distribution="fsdp",
                     tiling=tiling, memory_budget=budget)
    later = nt.compile_async(model.graph, comm=nt.SimulatedWorld(2), distribution="fsdp",
                             tiling=tiling, memory_budget=budget).result()
    assert later.plan.policy == now.plan.policy
    assert [str(i) for i in later.plan.program(1)] == [str(i) for i in now.plan.program(1)]
    assert any("EVICT" in str(i) for i in now.plan.program(1))


def test_a_failed_execute_leaves_the_tiles_where_they_rest(monkeypatch):
    """A PREFETCH that raises early in the step: the store puts every persistent tile
    back where it rests (runtime/offload_store.py settle), and the next step gives the
    results of a step that never failed."""
    from nntile_spmd.runtime.offload_store import OffloadStore
    case = mlp_case()
    plain, expected = run(case, 1, "single", steps=1)
    budget = int(plain.memory_on_rank(0) * 0.5)
    cg, _ = run(case, 1, "single", steps=0, memory_budget=budget)
    calls, read_into = [], OffloadStore.read_into

    def failing(self, key, buffer):
        calls.append(key)
        if len(calls) == 3:
            raise RuntimeError("injected prefetch failure")
        return read_into(self, key, buffer)
    monkeypatch.setattr(OffloadStore, "read_into", failing)
    with pytest.raises(RuntimeError, match="injected prefetch failure"):
        cg.execute()
    monkeypatch.setattr(OffloadStore, "read_into", read_into)
    rest = cg.stores[0].offload.rest
    assert set(cg.stores[0].tiles) == set(rest)
    cg.execute()
    cg.check_stats()
    values = {name: cg.get_output(name) for name in expected}
    assert [name for name in expected if not np.array_equal(expected[name], values[name])] == []
