"""Device-aware planning (plan/device_profile.py, plan/tile_budget.py,
runtime/device_tiling.py): on a GPU the default tiling makes tiles as large as the
distribution allows, unless memory or the user say otherwise; the simulator prices
tasks by the device's roofline. Planning needs no GPU (PlanningWorld). Plain pytest."""

import pytest

import nntile_spmd as nt
from nntile_spmd.models import gpt2
from nntile_spmd.plan.device_profile import PROFILES, DeviceProfile, device_profile
from nntile_spmd.plan.instructions import Exec
from nntile_spmd.simulate import MachineModel, simulate
from nntile_spmd.simulate.machine import cpu_profile

pytestmark = pytest.mark.mpi_skip


def layer(batch=64):
    """One gemm with 4 MiB of fp32 weight and a batch axis: 1 MiB tiles cut it."""
    g = nt.LogicalGraph("layer")
    x = g.tensor([1024, batch], "x", external=True)                    # (features, batch)
    w = g.tensor([1024, 1024], "w", requires_grad=True, persistent=True)
    nt.ops.gemm(w, x, "y").mark_output()
    return g


def small_gpt2():
    cfg = gpt2.GPT2Config(vocab_size=4096, n_positions=64, n_embd=128, n_layer=1, n_head=4)
    return gpt2.build_gpt2(cfg, batch=4, seq=64, dtype="fp32").graph


def tasks(cg, rank=0):
    return sum(type(instruction) is Exec for instruction in cg.plan.program(rank))


def test_a_gpu_plan_has_one_tile_per_rank_and_axis():
    graph = small_gpt2()
    gpu = nt.compile(graph, comm=nt.PlanningWorld(1), device="cuda")
    cpu = nt.build_plan(graph, 1)                     # what device="cpu" plans
    assert all(tiling.num_tiles == 1 for tiling in
               (spec_dim for spec in gpu.plan.tilings.values() for spec_dim in spec.dims))
    cpu_tasks = sum(type(instruction) is Exec for instruction in cpu.program(0))
    assert tasks(gpu) < cpu_tasks, (tasks(gpu), cpu_tasks)   # the logits are cut on the CPU
    assert "device h100: every task pays" in gpu.dump_plan()
    # the batch axis that ddp splits gets one tile per rank (pp: its micro-batches)
    ddp = nt.compile(layer(), comm=nt.PlanningWorld(4, 2), device="cuda", distribution="ddp")
    assert ddp.plan.tilings["x"].grid == (1, 4) and ddp.plan.tilings["w"].grid == (1, 1)


def test_the_cpu_and_the_user_keep_their_tiling(monkeypatch):
    cpu = nt.compile(layer(), comm=nt.PlanningWorld(1), device="cpu")
    assert cpu.plan.tilings["w"].grid != (1, 1)
    given = nt.TilingStrategy.auto(target_tile_bytes=1 << 20)
    gpu = nt.compile(layer(), comm=nt.PlanningWorld(1), device="cuda", tiling=given)
    assert gpu.plan.tilings == cpu.plan.tilings
    monkeypatch.setenv("NNTILE_SPMD_DEVICE", "cuda")      # "auto" follows the variable
    auto = nt.compile(layer(), comm=nt.PlanningWorld(1))
    assert auto.plan.tilings["w"].grid == (1, 1)
    background = nt.compile_async(layer(), comm=nt.PlanningWorld(1), device="cuda")
    assert background.result().plan.tilings == auto.plan.tilings


def test_memory_caps_the_tiles(monkeypatch):
    small = PROFILES["h100"].within(64 << 20)          # 1 MiB tiles at most
    plan = nt.build_plan(layer(), 1, nt.TilingStrategy.auto(device=small))
    assert plan.tilings["w"].grid != (1, 1) and "within 1/64 of its 64 MiB" in \
        plan.tiling_notes[0]
    budget = nt.compile(layer(), comm=nt.PlanningWorld(1), device="cuda",
                        memory_budget=64 << 20)
    assert budget.plan.tilings == plan.tilings
    monkeypatch.setenv("NNTILE_SPMD_GPU_PROFILE", "h200")
    assert "device h200" in nt.compile(layer(), comm=nt.PlanningWorld(1),
                                       device="cuda").plan.tiling_notes[0]
    monkeypatch.setenv("NNTILE_SPMD_GPU_PROFILE", "cpu")
    with pytest.raises(ValueError, match="not a GPU profile"):
        nt.compile(layer(), comm=nt.PlanningWorld(1), device="cuda")


def test_profiles_refuse_bad_values_and_price_by_roofline():
    with pytest.raises(ValueError, match="unknown device profile 'tpu'"):
        device_profile("tpu")
    with pytest.raises(ValueError, match="launch_s must be a positive"):
        DeviceProfile("x", "gpu", 0, 1e12, 1e12, 1 << 30)
    with pytest.raises(ValueError, match="kind must be one of"):
        DeviceProfile("x", "fpga", 1e-6, 1e12, 1e12, 1 << 30)
    h100 = device_profile("cuda")
    assert h100.task_seconds(0, 0) == h100.launch_s
    assert h100.task_seconds(2 * h100.peak_flops, 0) == pytest.approx(2 + h100.launch_s)
    assert h100.task_seconds(1, h100.bandwidth_bytes_per_s) == pytest.approx(1 + h100.launch_s)
    assert repr(nt.TilingStrategy.auto(device="h100")).endswith("device=h100)")


def test_the_simulator_prices_tasks_by_the_device():
    graph = layer()
    h100 = simulate(graph, 1, MachineModel.for_device("h100"),
                    nt.TilingStrategy.auto(device="h100"))
    flops = 2 * 1024 * 1024 * 64
    nbytes = 4 * (1024 * 1024 + 2 * 1024 * 64)
    assert h100.step_s == pytest.approx(device_profile("h100").task_seconds(flops, nbytes))
    assert not h100.uncalibrated
    calibrated = MachineModel(task_overhead_s=2e-6, recv_cpu=(0.0, 1e-10),
                              op_types={"gemm": {"1": [1e-6, 1e-10], "2": [1e-6, 5e-11]}})
    profile = cpu_profile(calibrated)
    assert (profile.launch_s, profile.peak_flops, profile.bandwidth_bytes_per_s) == \
        pytest.approx((3e-6, 2e10, 1e10))
    with pytest.raises(ValueError, match="no calibrated gemm"):
        cpu_profile(MachineModel())
