"""nt.autoplan and compile(distribution="auto") (search/): candidates ranked by the
simulator's predicted step, every one within the memory budget on every rank, a budget
that rules out ddp still gives a plan that trains as one rank does; the representative
ranks of a large world hold its worst peak (checked where every rank can be planned).
A fixed machine model (the defaults) keeps these tests free of calibration."""

import re

import numpy as np
import pytest

import nntile_spmd as nt
from nntile_spmd.models import build_mlp
from nntile_spmd.search import MESH_AXES
from nntile_spmd.search.owners import owner_cost
from nntile_spmd.search.ranks import SAMPLED_MARGIN, representative_ranks
from nntile_spmd.search.space import distributions
from nntile_spmd.simulate import MachineModel
from nntile_spmd.train import add_optimizer

SIZES, BATCH = [12, 16, 5], 8


def mlp():
    model = build_mlp(SIZES, BATCH, dtype="fp64")
    add_optimizer(model.graph, model.params, model.grads, "adam")
    return model


@pytest.fixture(scope="module")
def unbounded():
    return nt.autoplan(mlp().graph, nt.PlanningWorld(2), machine=MachineModel())


def test_candidates_are_ranked_and_described(unbounded):
    candidates = unbounded
    times = [c.predicted_step_s for c in candidates]
    assert times == sorted(times) and all(t > 0 for t in times)
    labels = {c.label.split("/")[0] for c in candidates}
    assert {"single", "ddp", "fsdp", "tp"} <= labels
    for c in candidates:
        assert c.peak_bytes_per_rank == max(c.peaks.values()) > 0
        assert set(c.peaks) == {0, 1}          # a small world: every rank planned
        assert isinstance(c.tiling, nt.TilingStrategy) and c.offload is False
    assert {c.bytes_sent_per_rank > 0 for c in candidates} == {True, False}   # single: 0


def test_budget_that_rules_out_ddp_picks_a_plan_that_fits_and_trains(unbounded):
    """Below every plain ddp plan's peak: compile("auto") picks another that fits."""
    model = mlp()
    budget = min(c.peak_bytes_per_rank for c in unbounded if c.distribution == "ddp") - 1
    rng = np.random.default_rng(0)
    params, x = model.init_params(rng), np.asfortranarray(rng.standard_normal((12, BATCH)))
    y = rng.integers(0, 5, BATCH).astype(np.int64)
    losses = []
    for comm, distribution in ((nt.SimulatedWorld(2), "auto"), (nt.SimulatedWorld(1), "single")):
        cg = nt.compile(model.graph, comm=comm, distribution=distribution,
                        memory_budget=budget if distribution == "auto" else None,
                        machine=MachineModel())
        for name, value in {**params, "x": x, "y": y}.items():
            cg.bind_data(name, value)
        cg.execute()
        losses.append(float(np.asarray(cg.get_output(model.loss.name))))
        if distribution == "auto":
            assert cg.plan.policy is not None or cg.plan.distributions != nt.build_plan(
                model.graph, 2, None, "ddp").distributions
            assert max(cg.get_stats(r).peak_bytes for r in range(2)) <= budget
            cg.check_stats()
    assert losses[0] == pytest.approx(losses[1], rel=1e-12)


def test_compile_async_auto_plans_the_first_candidate_in_the_background(unbounded):
    """compile_async(distribution="auto"): the search on the caller's thread, the first
    candidate's plan in the background; a tiling beside "auto" is refused at once."""
    graph = mlp().graph
    pending = nt.compile_async(graph, comm=nt.SimulatedWorld(2), distribution="auto",
                               machine=MachineModel())
    first = unbounded[0]
    expected = nt.build_plan(first.graph, 2, first.tiling, first.distribution)
    assert pending.result().plan.distributions == expected.distributions
    assert pending.result().plan.tilings == expected.tilings
    for compile_function in (nt.compile, nt.compile_async):
        with pytest.raises(ValueError, match="distribution='auto'.* chooses the tiling"):
            compile_function(graph, comm=nt.SimulatedWorld(2), distribution="auto",
                             tiling=nt.TilingStrategy.auto(), machine=MachineModel())


def test_a_budget_nothing_fits_names_it():
    with pytest.raises(ValueError, match="no candidate plan .* fits a memory budget of 1000"):
        nt.autoplan(mlp().graph, nt.PlanningWorld(1), memory_budget=1000,
                    machine=MachineModel())


@pytest.mark.parametrize("distribution", [
    "fsdp", pytest.param({"dp": 4, "tp": 3}, marks=pytest.mark.slow)], ids=str)
def test_representative_ranks_hold_the_worst_peak(distribution):
    """Where every rank can be planned: the representative ranks' worst peak and bytes
    sent come within SAMPLED_MARGIN of the world's worst (a large world's budget check
    adds that margin)."""
    model = build_mlp([12, 16, 16, 5], 13, dtype="fp64")
    add_optimizer(model.graph, model.params, model.grads, "adam")
    nranks = int(np.prod(list(distribution.values()))) if isinstance(distribution, dict) \
        else 13
    plan = nt.build_plan(model.graph, nranks, nt.TilingStrategy.auto(256), distribution)
    peaks = [plan.peak_bytes(r) for r in range(nranks)]
    sent = [plan.bytes_sent(r) for r in range(nranks)]
    chosen = representative_ranks(distribution, nranks,
                                  owner_cost(plan, MachineModel(), 1).heavy)
    assert len(chosen) <= 8 < nranks
    assert max(peaks[r] for r in chosen) * (1 + SAMPLED_MARGIN) >= max(peaks)
    assert max(sent[r] for r in chosen) * (1 + SAMPLED_MARGIN) >= max(sent)


def test_space_is_a_table_of_mesh_axes():
    assert list(MESH_AXES) == ["dp", "fsdp", "tp", "pp", "cp"]
    four = distributions(4)
    assert four[0] == "single"
    named = {str(d) for d in four}
    assert {"single", "ddp", "fsdp", "tp", "pp", str({"dp": 2, "fsdp": 2}),
            str({"fsdp": 2, "tp": 2}), str({"dp": 2, "pp": 2}), "cp",
            str({"fsdp": 2, "cp": 2})} <= named
    assert distributions(1) == ["single"] and "tp" not in distributions(16)   # tp <= 8
    large = [str(d) for d in distributions(16, large=True)]
    assert "single" not in large and not [d for d in large if "pp" in d]


def test_a_large_world_is_planned_on_a_few_ranks():
    """Past FULL_REPLAY_RANKS: rank 0 bounds every candidate, the rest are planned on
    representative ranks only, and the list is still ranked and within the budget
    (with the sample's margin)."""
    budget = 40_000
    candidates = nt.autoplan(mlp().graph, nt.PlanningWorld(9), memory_budget=budget,
                             machine=MachineModel())
    assert [c.predicted_step_s for c in candidates] == \
        sorted(c.predicted_step_s for c in candidates)
    assert all(0 in c.peaks and len(c.peaks) <= 8 and not c.pending for c in candidates)
    assert all(c.peak_bytes_per_rank * 1.1 <= budget for c in candidates)
    assert "single" not in [c.distribution for c in candidates]


def test_a_large_world_discards_by_kept_bytes_before_any_program():
    """A budget below what ddp keeps on a rank (parameters, gradients, Adam's moments:
    about 9.4 KB) discards every ddp candidate from its owners, no rank program
    planned; each candidate priced was first planned and estimated from its owners."""
    lines = []
    candidates = nt.autoplan(mlp().graph, nt.PlanningWorld(9), memory_budget=9_000,
                             machine=MachineModel(), log=lines.append)
    assert any(re.match(r"discarded ddp/auto: over the memory budget: rank \d+ keeps "
                        r"9\d\d\d B across steps \(from the owners", line) for line in lines)
    assert "ddp" not in [c.distribution for c in candidates] and candidates
    estimated = {line.split()[1] for line in lines if "owner estimate" in line}
    assert {c.label for c in candidates} <= estimated


def test_bytes_per_rank_from_owners_equal_the_plan():
    """heaviest_ranks sums tile bytes per rank from owner arrays; the kept part must
    equal the plan's persistent bytes on every rank (groups of a mesh included)."""
    from nntile_spmd.search.ranks import tensor_bytes_per_rank
    graph = mlp().graph
    for distribution, nranks in (("fsdp", 3), ({"dp": 2, "fsdp": 2}, 4)):
        plan = nt.build_plan(graph, nranks, nt.TilingStrategy.auto(256), distribution)
        kept = sum(tensor_bytes_per_rank(plan, t) for t in graph.tensors() if t.keeps_storage)
        assert list(kept) == [plan.persistent_bytes(r) for r in range(nranks)]


class Measurable:
    """A world whose ranks each run in a process of their own (as MPIWorld)."""
    executes, runs_every_rank = True, False

    def __init__(self, size):
        self.size = size


def ranked(*rows):
    """Candidates (label, predicted ms, bytes sent) in predicted order."""
    from nntile_spmd.search.score import Candidate
    return [Candidate(label, None, False, False, ms * 1e-3, 0, sent, label)
            for label, ms, sent in rows]


def timed_labels(rows, world, machine, trials, measured, monkeypatch):
    """The labels time_candidates times, each step taken from `measured` (ms)."""
    from nntile_spmd.search import trials as trials_module
    monkeypatch.setattr(trials_module, "time_steps",
                        lambda c, world, options: measured[c.label] * 1e-3)
    return [c.label for c in
            trials_module.time_candidates(rows, world, machine, trials, None)]


def test_trials_time_the_candidates_the_model_cannot_tell_apart(monkeypatch):
    rows = ranked(("cp", 33.0, 900), ("fsdp", 36.0, 500), ("ddp", 42.0, 700),
                  ("single/auto", 80.0, 0), ("single/16KiB", 120.0, 0))
    near = {"cp": 34.0, "fsdp": 37.0, "ddp": 43.0, "single/auto": 79.0,
            "single/16KiB": 119.0}
    own, node = MachineModel(core_sharing="own"), MachineModel(core_sharing="node")
    three = Measurable(3)

    def timed(machine, trials=None, measured=near, world=three):
        return timed_labels(rows, world, machine, trials, measured, monkeypatch)

    # a core per rank, predictions close: those within 10 % of the first's
    assert timed(own) == ["cp", "fsdp"]
    # ranks sharing cores: within 2x, and the plan sending the fewest bytes
    assert timed(node) == ["cp", "fsdp", "ddp", "single/auto"]
    # the first ones measured far above their predictions: those predicted below the
    # fastest measured too, until a measurement comes close to the predictions
    assert timed(own, measured={**near, "cp": 90.0, "fsdp": 95.0}) == ["cp", "fsdp", "ddp"]
    assert timed(own, trials=3) == ["cp", "fsdp", "ddp"]
    assert timed(node, trials=0) == []
    # nothing to time where one process runs every rank, or plans only, or is alone
    for world in (nt.SimulatedWorld(3), nt.PlanningWorld(3), Measurable(1)):
        assert timed(node, world=world) == []


def test_timed_candidates_come_first_by_their_measured_step(monkeypatch):
    from nntile_spmd.search import trials
    rows = ranked(("cp", 33.0, 900), ("fsdp", 36.0, 500), ("ddp", 42.0, 700),
                  ("single", 80.0, 0), ("tp/16KiB", 120.0, 300))
    measured = {"cp": 0.062, "fsdp": 0.055, "ddp": 0.063, "single": 0.041}
    monkeypatch.setattr(trials, "time_steps", lambda c, world, options: measured[c.label])
    order = trials.run_trials(rows, Measurable(3), MachineModel(core_sharing="node"))
    assert [c.label for c in order] == ["single", "fsdp", "cp", "ddp", "tp/16KiB"]
    assert [c.trial_step_s for c in order] == [0.041, 0.055, 0.062, 0.063, None]


@pytest.mark.parametrize("trials", [-1, 1.5, True, "all"])
def test_bad_trials_are_refused_before_the_search(trials):
    with pytest.raises(ValueError, match="trials must be a number of candidates"):
        nt.autoplan(mlp().graph, nt.PlanningWorld(2), machine=MachineModel(), trials=trials)
