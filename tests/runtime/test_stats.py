"""get_stats(): measured, not copied from the plan — a corrupted tile shows up.

Multi-rank versions of the corruption tests are in test_stats_mpi.py.
"""

from collections import defaultdict, deque

import numpy as np
import pytest

import nntile_spmd as nt
from nntile_spmd import TileDistribution
from nntile_spmd.plan.memory import TileMeta
from nntile_spmd.runtime.simulated import SimulatedTransport
from nntile_spmd.runtime.staging import HostStagedTransport
from nntile_spmd.runtime.stats import ExecutionStats, OpTotals
from nntile_spmd.train import add_optimizer


def sent_once(comm):
    """x [4] in two tiles, x[1] on rank 1; y = gelu(x) all on rank 0: rank 1 sends x[1]."""
    g = nt.LogicalGraph("sent_once")
    x = g.tensor([4], "x", "fp32", external=True)
    nt.ops.gelu(x, "y").mark_output()
    cg = nt.compile(g, comm=comm, tiling=nt.TilingStrategy.manual({"x": [2]}),
                    distribution={"x": TileDistribution.custom([0, 1]),   # any rank count
                                  "y": TileDistribution.on_rank(0)})
    cg.bind_data("x", np.arange(4, dtype=np.float32))
    return cg


def shrink_tile(cg, rank, key, elements):
    """Replace `rank`'s tile by a smaller one, through its store's own allocator."""
    store, meta = cg.stores[rank], cg.plan.meta[key]
    store.free(key, meta)
    store.tiles[key] = store.new_buffer(TileMeta((elements,), meta.dtype, elements,
                                                 elements * 4))


def test_plan_and_measurement_agree_then_a_shrunk_tile_is_reported():
    cg = sent_once(nt.SimulatedWorld(2))
    cg.execute()
    for rank in (0, 1):
        cg.check_stats(rank)     # before the corruption: all equal
    assert cg.get_stats(1).bytes_transferred == 8 == cg.get_stats(0).bytes_received
    shrink_tile(cg, 1, ("x", (1,)), 1)
    cg.execute()
    assert cg.stats_vs_plan(1)["bytes_transferred"] == (8, 4)
    assert cg.stats_vs_plan(0)["bytes_received"] == (8, 4)
    assert cg.stats_vs_plan(1)["peak_bytes"] == (8, 4)
    with pytest.raises(RuntimeError, match="rank 1: bytes sent: planned 8, measured 4; "
                                           "rank 1: peak bytes: planned 8, measured 4"):
        cg.check_stats(1)
    with pytest.raises(RuntimeError, match="rank 0: bytes received: planned 8, measured 4"):
        cg.check_stats(0)


def test_a_tile_ten_times_too_big_is_a_truncation_error():
    """As MPI does: a message longer than the posted buffer is an error, not a pass."""
    cg = sent_once(nt.SimulatedWorld(2))
    store, key = cg.stores[1], ("x", (1,))
    store.free(key, cg.plan.meta[key])
    store.tiles[key] = store.new_buffer(TileMeta((20,), "fp32", 20, 80))
    with pytest.raises(RuntimeError, match="message truncated: 80 bytes from rank 1 .* "
                                           "into a 8-byte buffer on rank 0"):
        cg.execute()


def test_a_kept_buffer_shows_in_the_peak():
    """A buffer the store holds but the plan does not know of (a leak) raises the peak."""
    cg = sent_once(nt.SimulatedWorld(2))
    cg.execute()
    cg.stores[0].new_buffer(TileMeta((10,), "fp32", 10, 40))   # allocated, never freed
    cg.execute()
    planned, measured = cg.stats_vs_plan(0)["peak_bytes"]
    assert measured == planned + 40


def mlp_graph():
    """gemm, gelu, MSE loss, its gradient and an SGD step: three phases."""
    g = nt.LogicalGraph("mlp")
    x = g.tensor([6, 8], "x", "fp64", external=True)
    w = g.tensor([5, 6], "w", "fp64", requires_grad=True, persistent=True)
    target = g.tensor([5, 8], "t", "fp64", external=True)
    activation = nt.ops.gelu(nt.ops.gemm(w, x, "h"), "a")
    loss = nt.ops.mse_loss(activation, target, "loss")
    loss.mark_output()
    add_optimizer(g, [w], nt.grad(g, loss, [w]), "sgd", lr=0.1)
    return g


@pytest.mark.parametrize("ranks,preset", [(1, "single"), (3, "ddp"), (3, "fsdp"), (2, "tp")])
def test_breakdowns_add_up_to_the_totals(ranks, preset):
    g = mlp_graph()
    cg = nt.compile(g, comm=nt.SimulatedWorld(ranks), distribution=preset,
                    tiling=nt.TilingStrategy.manual({"x": [3, 3]}))
    rng = np.random.default_rng(0)
    for name in ("x", "w", "t"):
        cg.bind_data(name, rng.standard_normal(g.get_tensor(name).shape))
    cg.execute()
    phases = {op.phase for op in g.ops()}
    for rank in range(ranks):
        stats = cg.get_stats(rank)
        assert isinstance(stats, ExecutionStats) and stats.rank == rank
        assert stats.phases == ("forward", "backward", "optimizer")
        assert set(stats.by_phase) <= phases
        assert set(stats.by_op_type) <= {op.op_type for op in g.ops()}
        tasks = sum(type(i).__name__ == "Exec" for i in cg.plan.program(rank))
        for breakdown in (stats.by_phase, stats.by_op_type):
            total = OpTotals()
            for part in breakdown.values():
                for field in ("tasks", "flops", "kernel_ms", "wait_ms", "bytes_sent",
                              "bytes_received"):
                    setattr(total, field, getattr(total, field) + getattr(part, field))
            assert total.tasks == tasks
            assert total.flops == stats.flops_executed
            assert total.bytes_sent == stats.bytes_transferred
            assert total.bytes_received == stats.bytes_received
            assert 0 < total.kernel_ms + total.wait_ms <= stats.execution_time_ms
        # the executor thread's CPU time: measured apart, never more than its time
        assert 0 < stats.execution_cpu_ms <= stats.execution_time_ms + 0.1
        assert stats.messages_sent == sum(type(i).__name__ == "Send"
                                          for i in cg.plan.program(rank))
        cg.check_stats(rank)
        assert stats["peak_bytes"] == stats.peak_bytes          # dict-style access kept
        assert stats.as_dict()["bytes_transferred"] == stats.bytes_transferred
        with pytest.raises(KeyError, match="no field 'bytes'"):
            stats["bytes"]
    assert sum(cg.get_stats(r).bytes_transferred for r in range(ranks)) == \
        sum(cg.get_stats(r).bytes_received for r in range(ranks))


def test_stats_follow_the_phases_run():
    g = mlp_graph()
    cg = nt.compile(g, comm=nt.SimulatedWorld(2), distribution="ddp")
    for name in ("x", "w", "t"):
        cg.bind_data(name, np.ones(g.get_tensor(name).shape))
    cg.execute(phases=["forward", "backward"])
    stats = cg.get_stats(1)
    assert stats.phases == ("forward", "backward") and "optimizer" not in stats.by_phase
    cg.check_stats(1)


def test_get_stats_before_execute_raises():
    cg = sent_once(nt.SimulatedWorld(2))
    with pytest.raises(RuntimeError, match="rank 0 has not run an execute"):
        cg.get_stats(0)


class FakeDevice:
    """A 'GPU' whose arrays are NumPy: exercises host staging without CuPy."""

    xp = np

    @staticmethod
    def to_host(array):
        return np.array(array, order="F", copy=True)


def test_host_staging_buffers_are_measured():
    mailbox = defaultdict(deque)
    sender = HostStagedTransport(SimulatedTransport(0, mailbox), FakeDevice())
    receiver = HostStagedTransport(SimulatedTransport(1, mailbox), FakeDevice())
    tile = np.arange(6, dtype=np.float64).reshape(2, 3, order="F")
    sends = [sender.post_send(1, tag, tile) for tag in (0, 1)]
    assert sender.staging.held == sender.staging.peak == 2 * tile.nbytes
    for handle in sends:
        sender.wait_send(handle)
    assert sender.staging.held == 0 and sender.staging.peak == 96
    assert sender.traffic.sent_bytes == 96 and sender.traffic.sent_messages == 2
    target = np.empty((2, 3), order="F")
    handle = receiver.post_recv(0, 0, target)
    assert receiver.staging.held == 48
    assert receiver.test_recv(handle)
    receiver.finish_recv(handle, target)
    assert np.array_equal(target, tile) and receiver.staging.held == 0
    assert receiver.traffic.received_bytes == 48
