"""A plan is a value: everything it is a function of is given to its constructor
(PlanOptions: window, deterministic, fuse, own rank, offloading policy; the pipeline's order),
and using it (programs, memory, report, fingerprint) only fills its memo caches. The
plan cache keys an offloading plan by its policy."""

from functools import cached_property

import pytest

import nntile_spmd as nt
from nntile_spmd.models import build_mlp
from nntile_spmd.plan.cache import plan_key
from nntile_spmd.plan.offload import ExecutionPolicy, offload_slot_bytes, resident_at_rest
from nntile_spmd.plan.plan import Plan
from nntile_spmd.plan.plan_options import PlanOptions, PlanRequest
from nntile_spmd.plan.report import dump_plan
from nntile_spmd.runtime.compiled import plan_graph_cached
from nntile_spmd.train import add_optimizer

SIZES, BATCH = [12, 10, 8, 9, 7, 5], 13   # 5 layers over 3 pipeline stages, uneven
TILES = {"x": [5, 3], "w1": [3, 5]}
MEMOS = {"_programs", "_rank_programs", "_rest_sets"} | {
    name for name, value in vars(Plan).items() if isinstance(value, cached_property)}
CASES = [("pp", None), ({"pp": 3, "schedule": "1f1b"}, None), ("fsdp", 0.6),
         ("tp", 0.6), ("pp", 0.7)]


def training_graph():
    model = build_mlp(SIZES, BATCH, dtype="fp64")
    add_optimizer(model.graph, model.params, model.grads, "adam")
    return model.graph


def policy_for(graph, distribution, fraction):
    """Offloading with `fraction` of the largest un-offloaded peak as the budget."""
    if fraction is None:
        return None
    plain = nt.build_plan(graph, 3, nt.TilingStrategy.manual(TILES), distribution)
    peak = max(plain.peak_bytes(rank) for rank in range(3))
    return ExecutionPolicy(True, int(peak * fraction), 1.0)


def use(plan):
    """Everything a compile, a report and a memory estimate ask of a plan."""
    for phases in ("forward", None):
        for rank in range(plan.nranks):
            plan.program(rank, phases)
            plan.peak_bytes(rank, phases)
            resident_at_rest(plan, rank)
            if plan.policy is not None:
                offload_slot_bytes(plan, rank, phases)
    dump_plan(plan)
    plan.bytes_sent()
    plan.flops()
    plan.fingerprint()


@pytest.mark.parametrize("own_rank", [None, 1])
@pytest.mark.parametrize("distribution,fraction", CASES, ids=str)
def test_using_a_plan_assigns_nothing_but_its_memos(distribution, fraction, own_rank):
    graph = training_graph()
    plan = nt.build_plan(graph, 3, nt.TilingStrategy.manual(TILES), distribution,
                         rank=own_rank, policy=policy_for(graph, distribution, fraction))
    assert (plan.pipeline is not None) == ("pp" in str(distribution))
    assert (plan.policy is not None) == (fraction is not None)
    built = dict(vars(plan))
    use(plan)
    after = vars(plan)
    assert set(after) - set(built) <= MEMOS, set(after) - set(built) - MEMOS
    changed = [name for name in built if after[name] is not built[name]]
    assert not changed, f"assigned after construction: {changed}"


@pytest.mark.parametrize("distribution", ["fsdp", "pp"])
def test_the_rest_set_is_the_same_whichever_program_comes_first(distribution):
    """resident_at_rest derives the all-phases program before offloading itself when a
    forward-only program is asked for first; it equals the one the all-phases build
    records on the way."""
    graph = training_graph()
    policy = policy_for(graph, distribution, 0.6)
    tiling = nt.TilingStrategy.manual(TILES)
    forward_first = nt.build_plan(graph, 3, tiling, distribution, policy=policy)
    forward_first.programs("forward")
    everything_first = nt.build_plan(graph, 3, tiling, distribution, policy=policy)
    everything_first.programs()
    for rank in range(3):
        assert resident_at_rest(forward_first, rank) == resident_at_rest(everything_first, rank)
    assert [[str(i) for i in p] for p in forward_first.programs()] == \
        [[str(i) for i in p] for p in everything_first.programs()]
    assert any(resident_at_rest(everything_first, rank) != everything_first.permanent[rank]
               for rank in range(3))


def test_a_disabled_policy_plans_as_no_policy():
    graph = training_graph()
    plan = nt.build_plan(graph, 3, nt.TilingStrategy.manual(TILES), "fsdp",
                         policy=ExecutionPolicy(False, 1 << 20))
    assert plan.policy is None


def fsdp_request(tiling, policy):
    return PlanRequest(3, tiling, "fsdp", PlanOptions(policy=policy))


def test_offloading_plans_are_cached_under_their_policy():
    graph, tiling = training_graph(), nt.TilingStrategy.manual(TILES)
    tight, loose = (policy_for(graph, "fsdp", fraction) for fraction in (0.6, 0.8))
    cache = nt.PlanCache()

    def planned(policy):
        return plan_graph_cached(graph, fsdp_request(tiling, policy), cache)

    first = planned(tight)
    assert planned(tight) is first
    other = planned(loose)
    assert other is not first and other.policy == loose
    assert planned(None).policy is None
    assert (cache.stats.misses, cache.stats.hits) == (3, 1)
    keys = {plan_key(graph, fsdp_request(tiling, policy))
            for policy in (tight, loose, None)}
    assert len(keys) == 3
    assert len({first.fingerprint(), other.fingerprint(), planned(None).fingerprint()}) == 3


def test_an_offloading_plan_read_from_disk_runs_the_same_programs(tmp_path):
    graph, tiling = training_graph(), nt.TilingStrategy.manual(TILES)
    policy = policy_for(graph, "fsdp", 0.6)
    stored = plan_graph_cached(graph, fsdp_request(tiling, policy), nt.PlanCache(tmp_path))
    restarted = nt.PlanCache(tmp_path)
    loaded = plan_graph_cached(graph, fsdp_request(tiling, policy), restarted)
    assert restarted.stats.disk_hits == 1 and loaded is not stored
    assert [[str(i) for i in p] for p in loaded.programs()] == \
        [[str(i) for i in p] for p in stored.programs()]
    assert all(resident_at_rest(loaded, r) == resident_at_rest(stored, r) for r in range(3))
