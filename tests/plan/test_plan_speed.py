"""Planning at scale: a narrow 48-layer MLP runs on a 64-rank SimulatedWorld.

How fast the wide version plans (the goal: under 5 s of CPU for 64 ranks, and a
rank alone cheaper than all ranks) is measured by benchmarks/bench_plan_speed.py,
not asserted here: a time bound in a test fails on a busy machine, not on slow
code. Plain pytest.
"""

import numpy as np
import pytest
from helpers import gelu, stat_problems

import nntile_spmd as nt

LAYERS, RANKS = 48, 64
# single-process tier: under mpiexec every rank would plan at once and time its neighbours
pytestmark = pytest.mark.mpi_skip


def deep_mlp(width, hidden, batch, layers=LAYERS, dtype="fp32"):
    """Layers alternately width -> hidden and hidden -> width: gemm, bias add, gelu
    each (48 layers, 144 ops). No residual adds: they would tie every layer's model
    axis into one class, which the "tp" preset would then split (see the report)."""
    g = nt.LogicalGraph("deep_mlp")
    h = g.tensor([width, batch], "x", dtype=dtype, external=True)          # (width, batch)
    for layer in range(layers):
        out = hidden if layer % 2 == 0 else width
        w = g.tensor([out, h.shape[0]], f"w{layer}", dtype, requires_grad=True, persistent=True)
        b = g.tensor([out], f"b{layer}", dtype, requires_grad=True, persistent=True)
        z = nt.ops.add_fiber(1.0, b, 1.0, nt.ops.gemm(w, h, f"z{layer}"), f"zb{layer}")
        h = nt.ops.gelu(z, f"a{layer}")
    h.mark_output()
    return g


def reference_mlp(graph, arrays):
    h = arrays["x"]
    for layer in range(LAYERS):
        h = gelu(arrays[f"w{layer}"] @ h + arrays[f"b{layer}"][:, None])
    return h


@pytest.mark.parametrize("preset", ["ddp", "fsdp", "tp"])
def test_narrow_48_layers_run_on_64_simulated_ranks(preset):
    graph = deep_mlp(width=4, hidden=8, batch=64, dtype="fp64")
    cg = nt.compile(graph, comm=nt.SimulatedWorld(RANKS), distribution=preset,
                    tiling=nt.TilingStrategy.auto(target_tile_bytes=1024))
    rng = np.random.default_rng(0)
    arrays = {tensor.name: rng.standard_normal(tensor.shape) / 2 for tensor in graph.tensors()
              if tensor.role in ("input", "parameter")}
    for name, array in arrays.items():
        cg.bind_data(name, array)
    cg.execute()
    np.testing.assert_allclose(cg.get_output(graph.tensors()[-1].name),
                               reference_mlp(graph, arrays), rtol=1e-9, atol=1e-9)
    assert not stat_problems(cg)
    assert sum(cg.get_stats(rank).flops_executed > 0 for rank in range(RANKS)) > RANKS // 2
