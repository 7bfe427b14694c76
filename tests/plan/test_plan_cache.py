"""The plan cache: a second compile of the same graph is served from memory, a
restarted job from disk, anything that changes the plan changes the key, and what
cannot be described is planned every time; compile_async gives what compile gives."""

import numpy as np
import pytest

import nntile_spmd as nt
from nntile_spmd.plan import cache_file
from nntile_spmd.plan.cache import Uncacheable, plan_key, shared_cache
from nntile_spmd.plan.distribution import TileDistribution
from nntile_spmd.plan.plan import build_plan
from nntile_spmd.plan.plan_options import PlanOptions, PlanRequest
from nntile_spmd.runtime.compiled import plan_graph_cached


def mlp_graph(hidden=6):
    from nntile_spmd.models.mlp import build_mlp
    return build_mlp((5, hidden, 3), batch=4, dtype="fp64").graph


def listing(plan):
    return [[str(i) for i in program] for program in plan.programs()]


def request(nranks=2, tiling=None, distribution="fsdp", **options):
    return PlanRequest(nranks, tiling, distribution, PlanOptions(**options))


def key_of(graph, **arguments):
    return plan_key(graph, request(**arguments))


def planned(cache, graph, **arguments):
    return plan_graph_cached(graph, request(**arguments), cache)


def test_the_second_plan_of_the_same_graph_comes_from_memory():
    cache = nt.PlanCache()
    first = planned(cache, mlp_graph())
    second = planned(cache, mlp_graph())        # an equal graph, built again
    assert second is first
    assert (cache.stats.misses, cache.stats.hits) == (1, 1)
    assert cache.stats.planning_s > 0


@pytest.mark.parametrize("change", ["nranks", "tiling", "min_tile", "distribution", "window",
                                    "deterministic", "fuse", "own_rank", "graph"])
def test_anything_that_changes_the_plan_changes_the_key(change):
    base = dict(nranks=2, tiling=nt.TilingStrategy.auto(1 << 10),
                distribution="fsdp", window=8, deterministic=False)
    changed = dict(base)
    changed.update({"nranks": {"nranks": 3},
                    "tiling": {"tiling": nt.TilingStrategy.auto(1 << 9)},
                    "min_tile": {"tiling": nt.TilingStrategy.auto(1 << 10, min_tile=2)},
                    "distribution": {"distribution": "ddp"},
                    "window": {"window": 4},
                    "deterministic": {"deterministic": True},
                    "fuse": {"fuse": True},
                    "own_rank": {"own_rank": 1},
                    "graph": {}}[change])
    other_graph = mlp_graph(hidden=7) if change == "graph" else mlp_graph()
    assert key_of(mlp_graph(), **base) == key_of(mlp_graph(), **base)
    assert key_of(mlp_graph(), **base) != key_of(other_graph, **changed)


def test_a_restarted_job_reads_the_plan_from_disk(tmp_path):
    graph = mlp_graph()
    fresh = build_plan(graph, 2, None, "fsdp")
    planned(nt.PlanCache(tmp_path), mlp_graph())
    restarted = nt.PlanCache(tmp_path)             # a new process: empty memory
    plan = planned(restarted, graph)
    assert (restarted.stats.disk_hits, restarted.stats.misses) == (1, 0)
    assert plan.graph is graph                     # the caller's graph, not a copy
    assert listing(plan) == listing(fresh)
    assert [plan.peak_bytes(r) for r in range(2)] == [fresh.peak_bytes(r) for r in range(2)]


def test_a_damaged_cache_file_is_planned_again_and_replaced(tmp_path):
    planned(nt.PlanCache(tmp_path), mlp_graph())
    (path,) = tmp_path.glob("plan-*.pkl")
    path.write_bytes(path.read_bytes()[:100])
    cache = nt.PlanCache(tmp_path)
    with pytest.warns(RuntimeWarning, match="plan cache file .* is refused: .*planning again"):
        plan = planned(cache, mlp_graph())
    assert (cache.stats.disk_hits, cache.stats.misses) == (0, 1)
    assert listing(plan) == listing(build_plan(mlp_graph(), 2, None, "fsdp"))
    assert nt.PlanCache(tmp_path).load(key_of(mlp_graph()),
                                       mlp_graph()) is not None


def flip_bit(data: bytes, position: int) -> bytes:
    return data[:position] + bytes([data[position] ^ 0x10]) + data[position + 1:]


# where a byte of a cache file is damaged -> what the warning says
DAMAGE = {"magic": (lambda size: 3, "no header"),
          "header": (lambda size: 40, "header|another"),
          "plan_start": (lambda size: size // 3, "signature"),
          "plan_end": (lambda size: size - 2, "signature")}


@pytest.mark.parametrize("where", sorted(DAMAGE))
def test_a_flipped_bit_is_refused_with_a_warning_and_planned_again(tmp_path, where):
    """Before the checksum an unpickled damaged plan failed with messages that never
    named the cache (No module named 'nntile_spmd.plaf', KeyError, a simulated deadlock)
    or, once in 120 flips, computed a wrong result."""
    reference = run_mlp(nt.compile(mlp_graph(), comm=nt.SimulatedWorld(2),
                                   distribution="fsdp", cache=nt.PlanCache(tmp_path)))
    (path,) = tmp_path.glob("plan-*.pkl")
    position, reason = DAMAGE[where]
    path.write_bytes(flip_bit(path.read_bytes(), position(path.stat().st_size)))
    cache = nt.PlanCache(tmp_path)
    with pytest.warns(RuntimeWarning, match=f"{path.name} is refused: .*({reason})"):
        cg = nt.compile(mlp_graph(), comm=nt.SimulatedWorld(2), distribution="fsdp",
                        cache=cache)
    assert run_mlp(cg) == reference
    assert (cache.stats.disk_hits, cache.stats.misses) == (0, 1)
    assert nt.PlanCache(tmp_path).load(cache_key(), mlp_graph()) is not None   # rewritten


def cache_key():
    return key_of(mlp_graph())


def test_a_file_under_another_key_or_from_another_library_is_refused(tmp_path, monkeypatch):
    planned(nt.PlanCache(tmp_path), mlp_graph())
    (path,) = tmp_path.glob("plan-*.pkl")
    other = mlp_graph(hidden=7)
    other_path = nt.PlanCache(tmp_path).path(key_of(other))
    path.rename(other_path)                      # a file copied under another name
    with pytest.warns(RuntimeWarning, match="written for another graph"):
        assert planned(nt.PlanCache(tmp_path), other).graph is other
    monkeypatch.setattr(cache_file, "library_fingerprint", lambda: "0.0.0+edited")
    with pytest.warns(RuntimeWarning, match="written by another build of nntile_spmd"):
        assert nt.PlanCache(tmp_path).load(key_of(other), other) is None


def test_an_owner_function_is_never_cached():
    def owners(coord, grid, nranks):
        return 0
    distribution = {"w1": TileDistribution.custom(owners)}
    with pytest.raises(Uncacheable):
        key_of(mlp_graph(), distribution=distribution)
    cache = nt.PlanCache()
    planned(cache, mlp_graph(), distribution=distribution)
    planned(cache, mlp_graph(), distribution=distribution)
    assert (cache.stats.uncacheable, cache.stats.hits, cache.stats.misses) == (2, 0, 0)


def test_the_environment_variable_turns_the_disk_cache_on(tmp_path, monkeypatch):
    monkeypatch.setenv("NNTILE_SPMD_PLAN_CACHE", str(tmp_path))
    nt.compile(mlp_graph(), comm=nt.SimulatedWorld(2), distribution="ddp")
    assert len(list(tmp_path.glob("plan-*.pkl"))) == 1
    assert shared_cache().stats.misses == 1


def run_mlp(cg, seed=0):
    rng = np.random.default_rng(seed)
    from nntile_spmd.models.mlp import init_linear_params
    for name, value in init_linear_params((5, 6, 3), rng, "fp64").items():
        cg.bind_data(name, value)
    cg.bind_data("x", rng.standard_normal((5, 4)))
    cg.bind_data("y", rng.integers(0, 3, 4))
    cg.execute()
    return float(cg.get_output("loss"))


def test_cached_and_async_compiles_compute_what_compile_computes():
    reference = run_mlp(nt.compile(mlp_graph(), comm=nt.SimulatedWorld(3), distribution="tp"))
    cached = [run_mlp(nt.compile(mlp_graph(), comm=nt.SimulatedWorld(3), distribution="tp",
                                 cache=True)) for _ in range(2)]
    pending = nt.compile_async(mlp_graph(), comm=nt.SimulatedWorld(3), distribution="tp")
    assert isinstance(pending, nt.PendingCompile)
    cg = pending.result()
    assert pending.done() and pending.result() is cg
    assert cached == [reference, reference] == [run_mlp(cg)] * 2


def test_async_compile_raises_the_planning_error_from_result():
    g = nt.LogicalGraph("unplannable")
    x = g.tensor([4], "x", "fp32")          # read, but neither input nor written
    nt.ops.gelu(x, "y").mark_output()
    pending = nt.compile_async(g, comm=nt.SimulatedWorld(1))
    with pytest.raises(nt.PlanError):
        pending.result()
