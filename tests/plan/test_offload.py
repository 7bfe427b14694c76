"""The offloading pass (plan/offload.py): Belady's choice of victims is optimal on
unit-sized tiles (checked against an exhaustive search), every program's planned
device peak stays within the budget and begins and ends in the rest state, every
PREFETCH follows the EVICT that wrote its copy, prefetches run ahead of their use
when the budget allows, a budget below one task's needs is refused at compile
naming the task and the bytes, and bad policies are refused."""

import itertools

import numpy as np
import pytest

import nntile_spmd as nt
from nntile_spmd.models import mlp
from nntile_spmd.plan.instructions import Evict, Exec, Prefetch
from nntile_spmd.plan.memory import TileMeta
from nntile_spmd.plan.offload import ExecutionPolicy, as_policy
from nntile_spmd.plan.offload_pass import walk
from nntile_spmd.train import add_optimizer


def read(name):
    key = (name, ())
    return Exec("noop", (key,), (key,), (), {}, 0, f"read_{name}")


def min_fetches(sequence, resident, capacity):
    """Fewest fetches serving `sequence` with `capacity` unit tiles: every choice of
    victim tried (exhaustive search)."""
    best = {frozenset(resident): 0}
    for name in sequence:
        states = {}
        for state, cost in best.items():
            if name in state:
                options = [(state, cost)]
            elif len(state) < capacity:
                options = [(state | {name}, cost + 1)]
            else:
                options = [((state - {victim}) | {name}, cost + 1) for victim in state]
            for option, value in options:
                states[option] = min(states.get(option, value), value)
        best = states
    return min(best.values())


@pytest.mark.parametrize("seed", range(12))
def test_belady_fetches_are_the_fewest_possible(seed):
    rng = np.random.default_rng(seed)
    names = "abcde"
    sequence = [names[i] for i in rng.integers(0, len(names), 18)]
    meta = {(n, ()): TileMeta((1,), "fp64", 1, 8) for n in names}
    permanent = set(meta)
    rest = [(n, ()) for n in names[:2]]
    state = walk([read(n) for n in sequence], meta, permanent, rest, 2 * 8, 8, 0)
    fetched = sum(type(i) is Prefetch for i in state.out)
    assert fetched == min_fetches(sequence, {"a", "b"}, 2)
    assert max(state.levels) <= 16


def mlp_plan(ranks, distribution, **offload):
    model = mlp.build_mlp([20, 30, 10], batch=12, dtype="fp64")
    add_optimizer(model.graph, model.params, model.grads, "adamw", lr=1e-2)
    return nt.compile(model.graph, comm=nt.PlanningWorld(ranks, ranks - 1),
                      distribution=distribution, **offload,
                      tiling=nt.TilingStrategy.manual({"x": [7, 5], "h1": [11, 5]}))


@pytest.mark.parametrize("distribution", ["single", "ddp", "fsdp", "tp"])
def test_every_program_fits_and_ends_in_the_rest_state(distribution):
    ranks = 1 if distribution == "single" else 3
    rank = ranks - 1
    plain = mlp_plan(ranks, distribution)
    budget = int(plain.memory_on_rank(rank) * 0.4)
    cg = mlp_plan(ranks, distribution, memory_budget=budget)
    plan = cg.plan
    from nntile_spmd.plan.offload import resident_at_rest
    rest = resident_at_rest(plan, rank)
    for phases in (None, "forward", ("forward", "backward")):
        program = plan.program(rank, phases)
        assert cg.memory_on_rank(rank, phases) <= budget
        resident, copies = set(rest), set(plan.permanent[rank]) - rest
        for instruction in program:
            kind = type(instruction)
            if kind is Evict:
                assert instruction.key in resident
                resident.discard(instruction.key)
                if instruction.write_back:
                    copies.add(instruction.key)
            elif kind is Prefetch:
                assert instruction.key in copies and instruction.key not in resident
                resident.add(instruction.key)
            elif kind is Exec:
                taken = set(instruction.keys) - set(instruction.writes)
                assert taken <= resident, instruction
                resident.update(instruction.writes)
                copies.difference_update(instruction.writes)
            elif hasattr(instruction, "key") and type(instruction).__name__ == "Free":
                resident.discard(instruction.key)
            elif type(instruction).__name__ == "Recv":
                resident.add(instruction.key)
                copies.discard(instruction.key)
        assert resident == set(rest)
    # without a policy nothing changes
    assert not any(type(i) in (Evict, Prefetch) for i in plain.plan.program(rank))


def test_prefetches_run_ahead_of_their_use_when_the_budget_allows():
    plain = mlp_plan(1, "single")
    budget = int(plain.memory_on_rank(0) * 0.6)
    ahead = mlp_plan(1, "single", policy=ExecutionPolicy(True, budget, 1.0, 4)).plan.program(0)
    at_use = mlp_plan(1, "single", policy=ExecutionPolicy(True, budget, 1.0, 0)).plan.program(0)

    def execs_ahead(program):
        result = []
        for position, instruction in enumerate(program):
            if type(instruction) is Prefetch:
                later = [i for i in program[position:] if type(i) is Exec]
                use = next(n for n, i in enumerate(later) if instruction.key in i.keys)
                result.append(use)
        return result
    assert max(execs_ahead(at_use)) == 0
    assert max(execs_ahead(ahead)) > 0 and max(execs_ahead(ahead)) <= 4


def test_a_budget_below_one_task_is_refused_naming_it():
    with pytest.raises(nt.PlanError, match=r"memory budget 512 bytes on rank 0 is below "
                       r"what task EXEC \w+\(.* of op \w+ needs: \d+ bytes"):
        mlp_plan(1, "single", memory_budget=512)


def test_threshold_scales_the_budget_and_bad_policies_are_refused():
    assert as_policy(ExecutionPolicy(True, 1000)).budget() == 800   # seed default 0.8
    assert as_policy(ExecutionPolicy(False, 1000)) is None
    assert as_policy() is None
    for bad in (ExecutionPolicy(True, 0), ExecutionPolicy(True, 100, 0.0),
                ExecutionPolicy(True, 100, 1.0, -1), ExecutionPolicy(True, 1.5e3)):
        with pytest.raises(ValueError, match="offloading|prefetch_distance"):
            as_policy(bad)
    with pytest.raises(ValueError, match="either policy= or memory_budget="):
        as_policy(ExecutionPolicy(True, 100), 100)


def test_planning_world_reports_bytes_moved_beside_the_peak():
    plain = mlp_plan(3, "fsdp")
    cg = mlp_plan(3, "fsdp", memory_budget=int(plain.memory_on_rank(2) * 0.5))
    report = cg.dump_plan()
    assert "offloading: budget" in report and "\n  r2: " in report
    assert list(itertools.islice((line for line in report.splitlines()
                                  if line.startswith("  r2:")), 2))[1].split()[1:3] != \
        ["0", "B"]
