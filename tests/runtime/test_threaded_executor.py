"""The threaded executor (task_threads > 1) against the serial one: the same train
step of an MLP and of GPT-2 in fp64, on 1 and 3 simulated ranks, every preset, uneven
tiles, gives bitwise the same loss, outputs, gradients and updated weights; bytes,
FLOPs and the in-order peak equal the plan; a kernel error in a worker names its op."""

import numpy as np
import pytest
from helpers import worlds_and_presets

import nntile_spmd as nt
from nntile_spmd.models import gpt2, mlp
from nntile_spmd.runtime import core_share, executor_threads
from nntile_spmd.runtime.thread_budget import (simulated_task_threads,
                                              split_threads)
from nntile_spmd.train import add_optimizer

PRESETS = ["single", "ddp", "fsdp", "tp"]
MLP_SIZES = (13, 24, 17, 5)
MLP_BATCH = 22
MLP_TILES = {"x": [5, 7], "w2": [7, 10]}          # uneven everywhere
GPT2_CONFIG = dict(vocab_size=37, n_positions=12, n_embd=16, n_layer=2, n_head=4)
GPT2_TILES = {"h0_q": [3, 3, 1, 2], "logits": [10, 3, 1], "h_in": [5, 3, 1],
              "h0_fc": [20, 3, 1]}


@pytest.fixture(autouse=True)
def tasks_on_workers(monkeypatch):
    """Tiny test tiles would all run inline on the executor thread: send every task
    to the workers (test_mixed_inline_and_worker_tasks keeps a threshold)."""
    monkeypatch.setattr(executor_threads, "INLINE_FLOPS", 0)


def mlp_step(ranks, preset, task_threads, steps=2):
    model = mlp.build_mlp(MLP_SIZES, MLP_BATCH, "fp64")
    add_optimizer(model.graph, model.params, model.grads, "adamw", lr=1e-2,
                  weight_decay=0.01)
    model.logits.mark_output()
    cg = nt.compile(model.graph, comm=nt.SimulatedWorld(ranks), distribution=preset,
                    tiling=nt.TilingStrategy.manual(MLP_TILES), task_threads=task_threads)
    rng = np.random.default_rng(3)
    params = model.init_params(rng)
    for name, value in params.items():
        cg.bind_data(name, value)
    cg.bind_data("x", rng.standard_normal((MLP_SIZES[0], MLP_BATCH)))
    cg.bind_data("y", rng.integers(0, MLP_SIZES[-1], MLP_BATCH))
    losses = []
    for _ in range(steps):
        cg.execute()
        losses.append(cg.get_output(model.loss.name))
        for rank in range(ranks):
            cg.check_stats(rank)
    names = [model.loss.name, model.logits.name] + list(params) + \
        [g.name for g in model.grads]
    return cg, {name: cg.get_output(name) for name in names}, losses, (model, params)


def gpt2_adamw():
    model = gpt2.build_gpt2(gpt2.GPT2Config(**GPT2_CONFIG), batch=2, seq=7, dtype="fp64")
    add_optimizer(model.graph, model.params, model.grads, "adamw", lr=1e-2)
    return model


def gpt2_step(ranks, preset, task_threads):
    model, config = gpt2_adamw(), gpt2.GPT2Config(**GPT2_CONFIG)
    cg = nt.compile(model.graph, comm=nt.SimulatedWorld(ranks), distribution=preset,
                    tiling=nt.TilingStrategy.manual(GPT2_TILES), task_threads=task_threads)
    rng = np.random.default_rng(5)
    for name, value in model.init_params(rng).items():
        cg.bind_data(name, value)
    ids = rng.integers(0, config.vocab_size, (7, 2))
    targets = np.roll(ids, -1, axis=0)
    targets[-1] = -100
    cg.bind_data("input_ids", np.asfortranarray(ids))
    cg.bind_data("targets", np.asfortranarray(targets))
    cg.execute()
    for rank in range(ranks):
        cg.check_stats(rank)
    names = ["loss", "logits"] + [t.name for t in model.graph.tensors() if t.persistent]
    return {name: cg.get_output(name) for name in names}


def differing(first, second):
    return [name for name in first if not np.array_equal(first[name], second[name])]


@pytest.fixture(scope="module")
def mlp_serial():
    return {(ranks, preset): mlp_step(ranks, preset, 1)[1:3]
            for ranks in (1, 3) for preset in PRESETS}


@pytest.mark.parametrize("task_threads", [2, 3])
@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("ranks", [1, 3])
def test_mlp_steps_bitwise_equal_to_serial(mlp_serial, ranks, preset, task_threads):
    cg, outputs, losses, _ = mlp_step(ranks, preset, task_threads)
    assert cg.task_threads == task_threads
    serial_outputs, serial_losses = mlp_serial[(ranks, preset)]
    assert differing(outputs, serial_outputs) == []
    assert [a.tobytes() for a in losses] == [a.tobytes() for a in serial_losses]


def test_workers_ran_the_tasks(tmp_path):
    cg, *_ = mlp_step(3, "fsdp", 2, steps=1)
    profile = cg.profile(str(tmp_path / "trace.json"))
    threads = {event["tid"] for event in profile.trace["traceEvents"]
               if event.get("cat") == "task"}
    assert threads and 0 not in threads and threads <= {1, 2}


@pytest.mark.parametrize("preset", ["ddp", "tp"])
def test_mixed_inline_and_worker_tasks(mlp_serial, monkeypatch, preset):
    monkeypatch.setattr(executor_threads, "INLINE_FLOPS", 300)
    _, outputs, losses, _ = mlp_step(3, preset, 2)
    assert differing(outputs, mlp_serial[(3, preset)][0]) == []


def test_mlp_threaded_matches_numpy_reference():
    """The first step's loss against a one-process NumPy forward (mean cross-entropy)."""
    cg, _, losses, (model, params) = mlp_step(3, "tp", 2, steps=1)
    rng = np.random.default_rng(3)
    model.init_params(rng)
    x = rng.standard_normal((MLP_SIZES[0], MLP_BATCH))
    y = rng.integers(0, MLP_SIZES[-1], MLP_BATCH)
    logits = model.reference_forward(params, x)
    shifted = logits - logits.max(axis=0)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=0))
    expected = -log_probs[y, np.arange(MLP_BATCH)].mean()
    assert float(losses[0]) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("ranks, preset", worlds_and_presets((1, 3), PRESETS))
def test_gpt2_step_bitwise_equal_to_serial(ranks, preset):
    serial = gpt2_step(ranks, preset, 1)
    threaded = gpt2_step(ranks, preset, 2)
    assert len(serial) > 30
    assert differing(threaded, serial) == []


def test_deferred_frees_are_measured_and_in_order_peak_is_planned():
    cg, *_ = mlp_step(1, "single", 2, steps=1)
    stats = cg.get_stats(0)
    assert stats.in_order_peak_bytes == cg.memory_on_rank(0)
    assert stats.peak_bytes >= stats.in_order_peak_bytes
    serial, *_ = mlp_step(1, "single", 1, steps=1)
    assert serial.get_stats(0).peak_bytes == serial.get_stats(0).in_order_peak_bytes


@pytest.mark.parametrize("ranks,preset", [(1, "single"), (3, "ddp"), (3, "tp")])
def test_kernel_error_on_a_worker_names_the_op_and_leaves_a_usable_graph(ranks, preset):
    g = nt.LogicalGraph("emb")
    ids = g.tensor([6], "ids", dtype="int64", external=True)
    vocab = g.tensor([4, 5], "vocab", dtype="fp64", persistent=True)
    big = g.tensor([64, 64], "big", dtype="fp64", external=True)
    nt.ops.gemm(big, big, "square").mark_output()       # big tasks go to the workers
    nt.ops.embedding(ids, vocab, "emb", axis=1).mark_output()
    cg = nt.compile(g, comm=nt.SimulatedWorld(ranks), task_threads=2, distribution=preset,
                    tiling=nt.TilingStrategy.manual({"big": [32, 32], "vocab": [4, 2]}))
    cg.bind_data("vocab", np.ones((4, 5)))
    cg.bind_data("big", np.eye(64))
    cg.bind_data("ids", np.array([0, 1, 9, 2, 3, 4]))
    with pytest.raises(Exception) as raised:
        cg.execute()
    notes = "".join(getattr(raised.value, "__notes__", []))
    assert isinstance(raised.value, IndexError) and "kernel embedding" in notes
    assert "computing tile emb[0," in notes and "vocab[0,0]" in notes
    cg.bind_data("ids", np.array([0, 1, 4, 2, 3, 4]))
    cg.execute()
    assert np.array_equal(cg.get_output("square"), np.eye(64))
    assert np.array_equal(cg.get_output("emb"), np.ones((6, 4)))


def test_thread_budget_split():
    assert split_threads(2) == (2, 1)
    assert split_threads(4, 2) == (2, 2)
    assert split_threads(2, 1) == (1, 2)
    assert split_threads(2, 8) == (2, 1)        # never more tasks than threads
    with pytest.raises(ValueError, match="task_threads"):
        split_threads(2, 0)


def test_task_threads_from_environment(monkeypatch):
    monkeypatch.setenv("NNTILE_SPMD_TASK_THREADS", "3")
    assert simulated_task_threads() == 3
    assert split_threads(4) == (3, 1)
    assert simulated_task_threads(1) == 1
    monkeypatch.setenv("NNTILE_SPMD_TASK_THREADS", "zero")
    with pytest.raises(ValueError, match="NNTILE_SPMD_TASK_THREADS"):
        simulated_task_threads()
    monkeypatch.delenv("NNTILE_SPMD_TASK_THREADS")
    assert simulated_task_threads() == 1


def gemm_graph():
    g = nt.LogicalGraph("gemm")
    a = g.tensor([128, 128], "A", dtype="fp64", external=True)
    nt.ops.gemm(a, a, "C").mark_output()
    return g


@pytest.mark.parametrize("tile,expected", [(128, 1), (64, 1)])
def test_default_is_one_task_at_a_time(tile, expected, monkeypatch):
    """On an MPI rank with 2 threads, no choice made and its cores to itself, tasks run
    one at a time with BLAS on both threads, tiled or not (measured faster:
    docs/benchmarks.md#threads-inside-a-rank; test_core_share.py covers a contended node)."""
    monkeypatch.setattr(core_share.CoreShare, "others_busy_cores", lambda self: 0.0)
    cg = nt.compile(gemm_graph(), threads=2,
                    tiling=nt.TilingStrategy.manual({"A": [tile, tile]}))
    a = np.random.default_rng(0).standard_normal((128, 128))
    cg.bind_data("A", a)
    cg.execute()
    assert cg.task_threads == expected
    assert np.allclose(cg.get_output("C"), a @ a, rtol=1e-12, atol=1e-12)


