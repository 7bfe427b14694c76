"""cg.check_finite: the first task that writes a NaN or +Inf raises, naming its op, tile
and rank; -Inf (masks, max reductions) is allowed; off, nothing is checked."""

import numpy as np
import pytest

import nntile_spmd as nt
from nntile_spmd.runtime.finite_check import NonFiniteError


def sqrt_chain():
    """y = gelu(sqrt(x)): a negative x makes sqrt's output NaN, and gelu's after it."""
    g = nt.LogicalGraph("chain")
    x = g.tensor([4, 6], "x", dtype="fp64", external=True)
    nt.ops.gelu(nt.ops.sqrt(x, "root"), "y").mark_output()
    return g


def run(graph, bound, check, task_threads=1, tile=(2, 3)):
    cg = nt.compile(graph, comm=nt.SimulatedWorld(2), distribution="fsdp",
                    tiling=nt.TilingStrategy.manual({"x": list(tile)}), task_threads=task_threads)
    cg.check_finite = check
    for name, value in bound.items():
        cg.bind_data(name, value)
    cg.execute()
    return cg


@pytest.mark.parametrize("task_threads", [1, 2])
def test_the_first_op_writing_a_nan_is_named_with_its_tile_and_rank(task_threads):
    x = np.ones((4, 6))
    x[3, 5] = -1.0                                   # in tile x[1, 1]
    with pytest.raises(NonFiniteError, match="holds 1 NaN and 0 \\+Inf value") as raised:
        run(sqrt_chain(), {"x": x}, True, task_threads)
    notes = " ".join(getattr(raised.value, "__notes__", []))
    assert "in op sqrt_0 (kernel sqrt) computing tile root[1,1] from x[1,1] on rank 1" in notes


def test_off_nothing_is_checked():
    x = -np.ones((4, 6))
    cg = run(sqrt_chain(), {"x": x}, False)
    assert np.isnan(cg.get_output("y")).all()


def test_minus_infinity_of_a_mask_is_allowed():
    g = nt.LogicalGraph("masked")
    scores = g.tensor([4, 4], "x", dtype="fp64", external=True)
    nt.ops.mask_causal(-np.inf, scores)
    nt.ops.softmax(scores, "p", axis=0).mark_output()
    cg = run(g, {"x": np.zeros((4, 4))}, True, tile=(4, 2))
    assert np.isfinite(cg.get_output("p")).all()
