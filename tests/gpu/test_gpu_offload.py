"""Offloading and host copies of CuPy tiles, on the GPU.

Marked gpu (tests/conftest.py skips it without CuPy or a CUDA device). A persistent
tile that rests offloaded lives in a host slot: binding data into it was a TypeError
(a CuPy array written into NumPy memory). Offloaded AdamW steps must equal the same
steps without offloading bitwise (the same kernels in the same order); host copies of
tiles are Fortran-ordered (host staging sends them as raw bytes).
"""

import numpy as np
import pytest
from tests.runtime.test_offload_run import mlp_case, run   # tests/runtime/

import nntile_spmd as nt
from nntile_spmd.runtime.device import select_device

pytestmark = pytest.mark.gpu


def test_host_copies_of_tiles_keep_fortran_order():
    import cupy

    device = select_device("cuda", 0)
    tile = cupy.asfortranarray(cupy.arange(12.0).reshape(3, 4))
    host = device.to_host(tile)
    assert isinstance(host, np.ndarray) and host.flags.f_contiguous
    np.testing.assert_array_equal(host, cupy.asnumpy(tile))


def test_bind_and_get_output_reach_gpu_tiles_that_rest_offloaded():
    model, data, tiling, _ = mlp_case()
    plain = nt.compile(model.graph, comm=nt.SimulatedWorld(1), tiling=tiling, device="cuda")
    cg = nt.compile(model.graph, comm=nt.SimulatedWorld(1), tiling=tiling, device="cuda",
                    memory_budget=int(plain.memory_on_rank(0) * 0.3))
    assert ("w1_m", (0, 0)) in cg.stores[0].offload.copies
    value = np.random.default_rng(3).normal(size=(30, 20))
    cg.bind_data("w1_m", value)
    assert np.array_equal(cg.get_output("w1_m"), value)


@pytest.mark.parametrize("ranks,distribution", [(1, "single"), (3, "fsdp"), (3, "tp")])
def test_offloaded_adamw_on_the_gpu_is_bitwise_unchanged(ranks, distribution):
    case = mlp_case()
    plain, expected = run(case, ranks, distribution, device="cuda")
    budget = int(max(plain.memory_on_rank(r) for r in range(ranks)) * 0.5)
    cg, values = run(case, ranks, distribution, device="cuda", memory_budget=budget)
    assert [name for name in expected if not np.array_equal(expected[name], values[name])] == []
    assert sum(cg.get_stats(rank).bytes_prefetched for rank in range(ranks)) > 0
