"""How long a rank polls an old tile version's sends before it parks the buffer
(RankExecutor.retire_sends): for the grace period, or not at once when the node's
ranks outnumber its cores (MPIWorld.setup_node; threads.ranks_outnumber_cores is
tested in test_threads.py)."""

import time
import types

from nntile_spmd.runtime import executor as executor_module
from nntile_spmd.runtime.executor import RankExecutor


def retiring(send_grace_s, completes_after):
    """An executor holding one tile with one send that completes on test number
    `completes_after` (None: never), and the list of buffers parked."""
    tests, parked = [], []

    def test_send(handle):
        tests.append(handle)
        return completes_after is not None and len(tests) >= completes_after

    runner = object.__new__(RankExecutor)
    runner.send_grace_s = send_grace_s
    runner.pending_sends = {0: ["send"]}
    runner.transport = types.SimpleNamespace(test_send=test_send)
    runner.store = types.SimpleNamespace(park=parked.append)
    runner.slots, runner.parked = ["buffer"], []
    return runner, tests, parked


def test_a_crowded_node_parks_at_once_without_yielding_the_core(monkeypatch):
    yields = []
    monkeypatch.setattr(executor_module.os, "sched_yield", lambda: yields.append(1))
    runner, tests, parked = retiring(0.0, completes_after=None)
    assert runner.retire_sends(0) is False
    assert len(tests) == 1 and not yields          # one test, the core kept
    assert parked == ["buffer"] and runner.slots == [None]


def test_otherwise_the_sends_are_polled_for_the_grace_period():
    runner, tests, parked = retiring(0.05, completes_after=3)
    assert runner.retire_sends(0) is True
    assert len(tests) == 3 and not parked
    runner, tests, parked = retiring(0.002, completes_after=None)
    start = time.perf_counter()
    assert runner.retire_sends(0) is False
    assert time.perf_counter() - start >= 0.002 and parked == ["buffer"]
