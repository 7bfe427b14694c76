"""The CUDA-aware path with real CUDA events, in one process (no CUDA-aware MPI needed).

Marked gpu. Simulated ranks told that their MPI is CUDA-aware hand CuPy tiles to the
in-process transport, fenced by runtime/kernel_fences.py (an event per kernel, a wait
per transfer); the results must equal one rank's to 1e-12 in fp64.
"""

import numpy as np
import pytest
from helpers import adamw_gpt2_steps

import nntile_spmd as nt
from nntile_spmd.runtime.kernel_fences import KernelFences

pytestmark = pytest.mark.gpu


def test_fences_wait_on_events_of_the_right_kernels():
    import cupy

    fences = KernelFences(cupy)
    a, b = cupy.ones(1 << 20), cupy.zeros(1 << 20)
    b += a * 2.0
    fences.after_kernel([a, b], [b])
    fences.before_send(b)           # returns once the kernel writing b has run
    assert fences.last_write[id(b)][1].done
    assert float(b[0]) == 2.0


@pytest.mark.parametrize("preset", ["ddp", "fsdp", "tp"])
def test_cuda_aware_simulated_ranks_equal_one_rank(preset):
    _, expected = adamw_gpt2_steps("single", comm=nt.SimulatedWorld(1), device="cuda")
    world = nt.SimulatedWorld(2)
    world.cuda_aware = True
    cg, values = adamw_gpt2_steps(preset, comm=world, device="cuda")
    assert type(cg.stores[0].tiles[next(iter(cg.stores[0].tiles))]).__module__.startswith("cupy")
    for name, want in expected.items():
        np.testing.assert_allclose(values[name], want, rtol=1e-12, atol=1e-12, err_msg=name)
