"""Compiled graphs with device="cuda": every runtime op case on CuPy tiles against NumPy.

Marked gpu (tests/conftest.py skips it without CuPy or a CUDA device). The cases are
those of tests/runtime/test_runtime_ops.py, on 1 and 3 simulated ranks sharing the
GPU, with uneven tiles, so tiles move between ranks through device buffers.
"""

import pytest
from helpers import run_case
from tests.runtime.op_cases import OP_CASES   # tests/runtime/op_cases.py

import nntile_spmd as nt

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("case", OP_CASES, ids=str)
@pytest.mark.parametrize(("ranks", "preset"), [(1, "single"), (3, "ddp"), (3, "fsdp"),
                                               (3, "tp")])
def test_op_on_cuda_matches_numpy(case, ranks, preset):
    """Tiles of 2 on dims of 5 and 3, fp64: the same oracle as on the CPU."""
    sizes = dict.fromkeys(case.letters(), 5) | dict.fromkeys(case.letters()[1::2], 3)
    tiles = dict.fromkeys(case.letters(), 2)
    problems = run_case(case, sizes, nt.SimulatedWorld(ranks), preset, tiles=tiles,
                        device="cuda")
    assert not problems, f"{case} {preset} on {ranks} ranks: {problems}"


def test_device_cuda_keeps_tiles_on_the_gpu():
    """device="cuda" selects CuPy: the tiles are CuPy arrays, outputs come back as NumPy."""
    import cupy
    import numpy as np

    from nntile_spmd import ops

    graph = nt.LogicalGraph("gelu")
    x = graph.tensor([4, 3], "x", dtype="fp32", external=True)
    ops.gelu(x, "y").mark_output()
    cg = nt.compile(graph, comm=nt.SimulatedWorld(1), device="cuda")
    assert cg.device.name == "cuda" and cg.device.xp is cupy
    cg.bind_data("x", np.ones((4, 3), np.float32))
    cg.execute()
    cg.wait()
    assert all(isinstance(tile, cupy.ndarray) for tile in cg.stores[0].tiles.values())
    assert isinstance(cg.get_output("y"), np.ndarray)
