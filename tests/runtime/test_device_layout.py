"""Tiles keep their memory order across ranks on the GPU path, checked on the CPU.

The stand-in device (tests/stand_in_device.py) runs the runtime's GPU path on NumPy
arrays and copies to the host as CuPy does (C order unless asked). The simulated world
moves raw buffer bytes as MPI does, so a host copy in the wrong order arrives
transposed here as it did on two H100 ranks.
"""

from collections import defaultdict, deque

import numpy as np
import pytest
from helpers import run_case
from tests.runtime.op_cases import GEMM_CASES
from stand_in_device import stand_in_device

import nntile_spmd as nt
from nntile_spmd.runtime.simulated import SimulatedTransport

PRESETS = ("single", "ddp", "fsdp", "tp")


def test_simulated_messages_are_raw_buffer_bytes():
    """A C-ordered send lands in a Fortran buffer byte for byte, as over MPI."""
    mailbox = defaultdict(deque)
    sender, receiver = SimulatedTransport(0, mailbox), SimulatedTransport(1, mailbox)
    sent = np.arange(6.0).reshape(2, 3)                 # C order
    sender.post_send(1, 7, sent)
    buffer = np.empty((2, 3), order="F")
    handle = receiver.post_recv(0, 7, buffer)
    receiver.finish_recv(handle, buffer)
    np.testing.assert_array_equal(buffer.ravel(order="F"), sent.ravel(order="C"))
    with pytest.raises(ValueError, match="not contiguous"):
        sender.post_send(1, 8, np.ones((4, 4))[::2])


def test_device_host_copies_are_fortran_ordered():
    """What the staging transport sends and get_output gathers: the tile's own order."""
    device = stand_in_device()
    tile = np.asfortranarray(np.arange(12.0).reshape(3, 4))
    host = device.to_host(tile)
    assert host.flags.f_contiguous
    np.testing.assert_array_equal(host, tile)


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("case", GEMM_CASES, ids=str)
def test_gemm_on_two_stand_in_gpu_ranks_equals_numpy(case, preset):
    """Uneven rectangular tiles (2 on dims of 5 and 3), so a transposed tile is wrong."""
    sizes = dict.fromkeys(case.letters(), 5) | dict.fromkeys(case.letters()[1::2], 3)
    problems = run_case(case, sizes, nt.SimulatedWorld(2), preset,
                        tiles=dict.fromkeys(sizes, 2), device=stand_in_device())
    assert not problems, f"{case} {preset}: {problems}"
