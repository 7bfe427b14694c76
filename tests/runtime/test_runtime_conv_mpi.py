"""conv2d forward and backward on real MPI ranks against the one-process NumPy
reference: every preset, uneven tiles on every axis, measured traffic equal to planned.

    mpiexec -n 3 python -m pytest --with-mpi -p no:cacheprovider \
        tests/runtime/test_runtime_conv_mpi.py

Verdicts are collective (helpers.collective_ok): a failing rank never leaves the others
waiting.
"""

import numpy as np
import pytest
from helpers import collective_ok, stat_problems
from mpi4py import MPI
from test_runtime_conv import GEOMETRIES, conv_graph, numpy_conv, numpy_grads, uneven_tiling

import nntile_spmd as nt

pytestmark = pytest.mark.mpi(min_size=2)


@pytest.mark.parametrize("geometry", GEOMETRIES[:2], ids=["same", "strided"])
@pytest.mark.parametrize("preset", ["single", "ddp", "fsdp", "tp"])
def test_conv2d_on_mpi_ranks_matches_numpy(geometry, preset):
    problems = []
    try:
        g, y, grads = conv_graph(geometry)
        cg = nt.compile(g, distribution=preset, tiling=uneven_tiling(y.shape),
                        recv_timeout=60.0)
        rng = np.random.default_rng(1)
        x = np.asfortranarray(rng.standard_normal((9, 7, 3, 5)))
        c = np.asfortranarray(rng.standard_normal((3, 3, 3, 4)))
        target = np.asfortranarray(rng.standard_normal(y.shape))
        for name, value in (("x", x), ("c", c), ("target", target)):
            cg.bind_data(name, value)
        cg.execute()
        cg.wait()
        expected = numpy_conv(x, c, *geometry)
        dx, dc = numpy_grads(x, c, 2.0 * (expected - target), *geometry)
        got = {grad.grad_of: cg.get_output(grad.name) for grad in grads}
        for name, have, want in (("y", cg.get_output("y"), expected), ("dx", got["x"], dx),
                                 ("dc", got["c"], dc)):
            if not np.allclose(have, want, rtol=1e-11, atol=1e-12):
                problems.append(f"{name} differs from NumPy")
        problems += stat_problems(cg)
    except Exception as error:   # becomes this rank's verdict, not a hang
        problems.append(repr(error))
    assert collective_ok(MPI.COMM_WORLD, not problems), problems
