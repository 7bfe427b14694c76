"""cg.profile() and NNTILE_SPMD_PROFILE=1: a Chrome trace that is valid JSON with one
complete event per executed tile task, per-op-type times and per-rank busy/wait
times from the executors' clocks, for the serial and the threaded executor."""

import json
import os

import numpy as np
import pytest

import nntile_spmd as nt
from nntile_spmd.runtime import profile as profile_module


def chain_graph():
    g = nt.LogicalGraph("chain")
    x = g.tensor([12, 10], "x", dtype="fp64", external=True)
    w = g.tensor([9, 12], "w", dtype="fp64", persistent=True)
    h = nt.ops.gelu(nt.ops.gemm(w, x, "h"), "a")
    nt.ops.scale(h, "out", 0.5).mark_output()
    return g


def compiled(ranks, preset, task_threads):
    cg = nt.compile(chain_graph(), comm=nt.SimulatedWorld(ranks), distribution=preset,
                    tiling=nt.TilingStrategy.manual({"x": [5, 3], "w": [4, 5]}),
                    task_threads=task_threads)
    rng = np.random.default_rng(0)
    cg.bind_data("x", rng.standard_normal((12, 10)))
    cg.bind_data("w", rng.standard_normal((9, 12)))
    return cg


def executed_tasks(cg, ranks):
    return {rank: sum(t.tasks for t in cg.get_stats(rank).by_op_type.values())
            for rank in range(ranks)}


@pytest.mark.parametrize("task_threads", [1, 2])
@pytest.mark.parametrize("ranks,preset", [(1, "single"), (3, "ddp"), (3, "tp")])
def test_trace_has_one_event_per_task(tmp_path, ranks, preset, task_threads):
    cg = compiled(ranks, preset, task_threads)
    path = tmp_path / "trace.json"
    profile = cg.profile(str(path))
    with open(path) as file:
        trace = json.load(file)                       # valid JSON
    tasks = [e for e in trace["traceEvents"] if e.get("cat") == "task"]
    expected = executed_tasks(cg, ranks)
    assert {rank: sum(1 for e in tasks if e["pid"] == rank) for rank in range(ranks)} \
        == expected
    assert all(e["ph"] == "X" and e["dur"] >= 0 and e["ts"] >= 0 for e in tasks)
    # each event has the CPU time of the thread that ran it: never more than its time
    # (the clocks differ by their resolution)
    assert all(0 <= e["args"]["cpu_ms"] <= e["dur"] / 1e3 + 0.05
               for e in trace["traceEvents"] if e.get("ph") == "X")
    assert sum(row["tasks"] for row in profile.op_types.values()) == sum(expected.values())
    assert set(profile.op_types) == {"gemm", "gelu", "scale"}
    for rank in range(ranks):
        row = profile.ranks[rank]
        kernel_ms = sum(t.kernel_ms for t in cg.get_stats(rank).by_op_type.values())
        assert row["busy_ms"] == pytest.approx(kernel_ms)
        assert row["wall_ms"] == cg.get_stats(rank).execution_time_ms
        assert row["threads"] == task_threads
    assert "gemm" in profile.summary() and (tmp_path / "trace.txt").exists()
    assert not cg.profiling                           # recording was for that execute only


def test_env_variable_records_every_execute(tmp_path, monkeypatch):
    path = tmp_path / "env_trace.json"
    monkeypatch.setenv("NNTILE_SPMD_PROFILE", "1")
    monkeypatch.setenv("NNTILE_SPMD_PROFILE_PATH", str(path))
    cg = compiled(3, "fsdp", 2)
    cg.execute()
    with open(path) as file:
        first = json.load(file)
    tasks = [e for e in first["traceEvents"] if e.get("cat") == "task"]
    assert len(tasks) == sum(executed_tasks(cg, 3).values())
    os.remove(path)
    cg.execute()
    assert path.exists()


def test_env_variable_without_a_path_writes_outside_the_working_directory(
        tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("NNTILE_SPMD_PROFILE", "1")
    monkeypatch.delenv("NNTILE_SPMD_PROFILE_PATH", raising=False)
    monkeypatch.setattr(profile_module, "ENV_TRACE", {})
    monkeypatch.chdir(tmp_path)
    cg = compiled(1, "single", 2)
    cg.execute()
    cg.execute()
    path = profile_module.ENV_TRACE["path"]
    assert os.listdir(tmp_path) == [] and os.path.exists(path)
    assert capsys.readouterr().err.count(path) == 1   # said once, where it is
    cg.execute(phases="forward")   # an evaluation does not replace the step's trace
    assert os.path.exists(path.replace(".json", ".forward.json"))


def test_no_recording_without_profiling():
    cg = compiled(1, "single", 2)
    cg.execute()
    assert cg.events == {}
