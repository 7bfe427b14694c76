"""The cost-model replay of a plan: consistent with the plan and sensible in scale."""

import pytest

import nntile_spmd as nt
from nntile_spmd.plan.costmodel import CostModel, predict_step_time


def chain_graph(layers=3, width=64, batch=96):
    g = nt.LogicalGraph("chain")
    h = g.tensor([width, batch], "x", external=True)
    for i in range(layers):
        w = g.tensor([width, width], f"w{i}", requires_grad=True, persistent=True)
        h = nt.ops.gelu(nt.ops.gemm(w, h, f"h{i}"), f"a{i}")
    h.mark_output()
    return g


@pytest.mark.parametrize("preset", ["single", "ddp", "fsdp", "tp"])
def test_compute_only_time_is_flops_over_rate(preset):
    plan = nt.build_plan(chain_graph(), 1, nt.TilingStrategy.auto(4096), preset)
    model = CostModel(flops_per_second=1e9, task_overhead_s=0.0)
    (seconds,) = predict_step_time(plan, model)
    assert seconds == pytest.approx(plan.flops(0) / 1e9)


def test_ddp_forward_scales_down_with_ranks():
    graph = chain_graph()
    model = CostModel(task_overhead_s=0.0)
    times = [max(predict_step_time(nt.build_plan(graph, n, nt.TilingStrategy.auto(4096),
                                                 "ddp"), model)) for n in (1, 2, 4)]
    assert times[0] > times[1] > times[2]


def test_slow_network_makes_fsdp_slower_than_fast_network():
    plan = nt.build_plan(chain_graph(), 4, nt.TilingStrategy.auto(4096), "fsdp")
    assert plan.bytes_sent() > 0
    fast = max(predict_step_time(plan, CostModel(bandwidth_bytes_per_s=1e12)))
    slow = max(predict_step_time(plan, CostModel(bandwidth_bytes_per_s=1e6)))
    assert slow > fast
