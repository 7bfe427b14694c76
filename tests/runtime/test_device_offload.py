"""Offloading on the GPU path, checked on the CPU with the stand-in device.

A GPU tile that rests offloaded between executes lives in a host (NumPy) slot; binding
data into it must write host memory, where CuPy's array would not go (a
TypeError on the GPU once). The stand-in device (tests/stand_in_device.py) logs its
host-to-device copies; its EVICT and PREFETCH copy through get/set as CuPy's do.
"""

import numpy as np
import pytest
from stand_in_device import on_device, stand_in_device
from tests.runtime.test_offload_run import mlp_case, run

import nntile_spmd as nt


def test_copy_in_writes_host_slots_on_the_host_and_tiles_on_the_device():
    device = stand_in_device()
    values = np.arange(6.0).reshape(2, 3)
    slot = np.zeros((2, 3), order="F")               # where an offloaded tile rests
    device.copy_in(slot, values)
    assert device.xp.log == [] and np.array_equal(slot, values)
    tile = on_device(np.zeros((2, 3), order="F"))
    device.copy_in(tile, values)
    assert device.xp.log == [("to device",)] and np.array_equal(tile, values)


def test_bind_and_get_output_reach_gpu_tiles_that_rest_offloaded():
    case = mlp_case()
    plain, _ = run(case, 1, "single", steps=0)
    budget = int(plain.memory_on_rank(0) * 0.3)
    model, data, tiling, _ = case
    cg = nt.compile(model.graph, comm=nt.SimulatedWorld(1), tiling=tiling,
                    memory_budget=budget, device=stand_in_device())
    assert ("w1_m", (0, 0)) in cg.stores[0].offload.copies
    value = np.random.default_rng(3).normal(size=(30, 20))
    cg.bind_data("w1_m", value)
    assert type(cg.stores[0].offload.copies[("w1_m", (0, 0))]) is np.ndarray
    assert np.array_equal(cg.get_output("w1_m"), value)


@pytest.mark.parametrize("ranks,distribution", [(1, "single"), (3, "fsdp")])
def test_offloaded_training_on_the_gpu_path_equals_the_cpu(ranks, distribution):
    """AdamW steps under a memory budget on the stand-in GPU: the CPU's bits."""
    case = mlp_case()
    plain, _ = run(case, ranks, distribution, steps=0)
    budget = int(max(plain.memory_on_rank(r) for r in range(ranks)) * 0.5)
    _, expected = run(case, ranks, distribution, memory_budget=budget)
    _, values = run(case, ranks, distribution, memory_budget=budget,
                    device=stand_in_device())
    assert [name for name in expected if not np.array_equal(expected[name], values[name])] == []
