"""The automatic choice between tasks one at a time (BLAS on all the rank's threads)
and tile tasks side by side follows the measured share of cores other processes take:
the measurement's arithmetic, the rule, and a step that switches (bitwise the same)."""

import numpy as np
import pytest

import nntile_spmd as nt
from nntile_spmd.models import mlp
from nntile_spmd.runtime import core_share
from nntile_spmd.runtime.core_share import CoreShare
from nntile_spmd.runtime.thread_budget import TaskThreads
from nntile_spmd.train import add_optimizer

HZ = 100


@pytest.fixture(autouse=True)
def ticks(monkeypatch):
    monkeypatch.setattr(core_share.os, "sysconf", lambda name: HZ)


def scripted(samples):
    """A CoreShare reading (busy jiffies, total jiffies, cores, own CPU s) in turn."""
    samples = iter(samples)
    current = {}

    def read():
        current["sample"] = next(samples)
        return current["sample"][:3]
    return CoreShare(read, lambda: current["sample"][3])


def test_others_busy_cores_subtracts_this_process():
    # 2 cores, 1 s: 200 total jiffies; 150 busy, 0.5 s of them ours -> 1.0 core others'
    share = scripted([(0, 0, 2, 0.0), (150, 200, 2, 0.5), (200, 400, 2, 1.0)])
    assert share.others_busy_cores() == pytest.approx(1.0)
    # next second: 50 busy jiffies, all ours -> nobody else
    assert share.others_busy_cores() == pytest.approx(0.0)


def test_too_short_an_interval_measures_nothing_yet():
    share = scripted([(0, 0, 2, 0.0), (10, 20, 2, 0.0), (300, 400, 2, 0.0)])
    assert share.others_busy_cores() is None          # 0.1 s < MIN_INTERVAL_S
    assert share.others_busy_cores() == pytest.approx(1.5)   # measured from the start


def test_no_proc_stat_means_no_measurement():
    assert CoreShare(lambda: None).others_busy_cores() is None


class FixedShare:
    """others_busy_cores() returns the scripted values; a 2-core node."""

    def __init__(self, values):
        self.values, self.last = iter(values), (0, 0, 2, 0.0)

    def others_busy_cores(self):
        return next(self.values)


@pytest.mark.parametrize("others,expected", [(0.0, 1), (0.4, 1), (0.6, 2), (1.5, 2)])
def test_rule_task_threads_once_short_of_cores(others, expected):
    blas = []
    threading = TaskThreads(None, 2, blas.append, FixedShare([others]))
    assert threading.for_program(None, []) == expected
    assert blas == [1 if expected > 1 else 2]    # never tasks x BLAS threads > 2


def test_rule_keeps_its_verdict_without_a_new_measurement():
    threading = TaskThreads(None, 2, lambda threads: None, FixedShare([1.5, None, 0.0]))
    assert [threading.for_program(None, []) for _ in range(3)] == [2, 2, 1]


def test_one_thread_or_a_fixed_choice_never_measures():
    assert TaskThreads(None, 1, lambda threads: None).core_share is None
    assert TaskThreads(2, 2).for_program(None, []) == 2


def mlp_outputs(cg, model, rng):
    for name, value in model.init_params(rng).items():
        cg.bind_data(name, value)
    cg.bind_data("x", rng.standard_normal((13, 22)))
    cg.bind_data("y", rng.integers(0, 5, 22))
    cg.execute()
    cg.check_stats()
    names = [model.loss.name] + list(model.init_params(rng)) + [g.name for g in model.grads]
    return {name: cg.get_output(name) for name in names}


def test_contended_rank_switches_to_task_threads_with_bitwise_equal_results():
    """One MPI rank with 2 threads: a quiet measurement keeps tasks serial, a
    contended one runs them on 2 task threads; the fp64 step is bitwise the same."""
    results = {}
    for others in (0.0, 1.5):
        model = mlp.build_mlp((13, 24, 17, 5), 22, "fp64")
        add_optimizer(model.graph, model.params, model.grads, "adamw", lr=1e-2)
        cg = nt.compile(model.graph, threads=2,
                        tiling=nt.TilingStrategy.manual({"x": [5, 7], "w2": [7, 10]}))
        cg.threading.core_share = FixedShare([others])
        results[others] = mlp_outputs(cg, model, np.random.default_rng(3))
        assert cg.task_threads == (2 if others else 1)
    assert [name for name in results[0.0]
            if not np.array_equal(results[0.0][name], results[1.5][name])] == []
