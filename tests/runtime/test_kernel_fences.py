"""CUDA-aware transfers wait for the right CUDA events, checked on the CPU.

KernelFences (runtime/kernel_fences.py) on the stand-in device (tests/stand_in_device.py),
whose events log their records and waits: a send waits for the kernel that wrote its
tile, a receive for the last kernel using its buffer, and nothing synchronizes the
whole stream.
"""

import numpy as np
import pytest
from helpers import run_case
from tests.runtime.op_cases import GEMM_CASES
from stand_in_device import StandInCupy, stand_in_device

import nntile_spmd as nt
from nntile_spmd.runtime.kernel_fences import KernelFences
from nntile_spmd.runtime.simulated import SimulatedTransport


def waits(xp):
    return [entry[1] for entry in xp.log if entry[0] == "wait"]


def test_send_waits_for_its_writer_and_receive_for_its_last_reader():
    xp = StandInCupy()
    fences = KernelFences(xp)                  # event 1: the work before the execute
    a, b, c, d, fresh = (np.zeros(2) for _ in range(5))
    fences.after_kernel([a, b, c], [c])        # event 2: c = f(a, b)
    fences.after_kernel([c, d], [d])           # event 3: d = g(c)
    fences.before_send(c)
    fences.before_send(a)                      # not written in this execute
    fences.before_recv(c)                      # read by the kernel of event 3
    fences.before_recv(a)
    fences.before_recv(fresh)                  # unknown memory: the latest kernel
    assert waits(xp) == [2, 1, 3, 2, 3]
    assert ("stream sync",) not in xp.log


def test_a_prefetch_counts_as_a_write():
    xp = StandInCupy()
    fences = KernelFences(xp)
    tile = np.zeros(3)
    fences.after_write(tile)
    fences.before_send(tile)
    assert waits(xp) == [2]


def test_finished_entries_are_swept_and_fall_back_safely(monkeypatch):
    """Entries whose event completed are dropped (their buffers may return to the
    pool); such a buffer then waits as an unknown one does."""
    monkeypatch.setattr("nntile_spmd.runtime.kernel_fences.SWEEP_EVERY", 2)
    xp = StandInCupy()
    fences = KernelFences(xp)
    tiles = [np.zeros(1) for _ in range(2)]
    for tile in tiles:
        fences.after_kernel([tile], [tile])
    assert not fences.last_use and not fences.last_write
    fences.before_recv(tiles[0])
    assert waits(xp) == [3]


@pytest.mark.parametrize("preset", ["ddp", "fsdp", "tp"])
@pytest.mark.parametrize("case", GEMM_CASES, ids=str)
def test_cuda_aware_ranks_fence_each_transfer_and_equal_numpy(case, preset, monkeypatch):
    """Two simulated CUDA-aware ranks on the stand-in device: right results, an event
    per kernel, a wait per transfer, no whole-stream synchronize during the run."""
    transfers = []
    for name in ("post_send", "post_recv"):
        method = getattr(SimulatedTransport, name)
        monkeypatch.setattr(SimulatedTransport, name,
                            lambda self, *args, method=method: transfers.append(1)
                            or method(self, *args))
    world = nt.SimulatedWorld(2)
    world.cuda_aware = True
    device = stand_in_device()
    sizes = dict.fromkeys(case.letters(), 5) | dict.fromkeys(case.letters()[1::2], 3)
    problems = run_case(case, sizes, world, preset, tiles=dict.fromkeys(sizes, 2),
                        device=device)
    assert not problems, f"{case} {preset}: {problems}"
    log = device.xp.log
    assert any(entry[0] == "record" for entry in log)
    assert len(waits(device.xp)) == len(transfers)
    # the only stream synchronizes are execute()'s end and wait(), after the run
    assert log[-1] == ("stream sync",) and log.count(("stream sync",)) == 2
