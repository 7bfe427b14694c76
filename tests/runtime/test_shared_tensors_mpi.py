"""Tensors shared between compiled graphs on real MPI ranks (runtime/sharing.py): the
seed's forward, backward and optimizer graphs (test_shared_tensors.py) share parameters
and gradients on every rank's own tiles and train as one graph does, on the same ranks
and on one simulated rank; the ranks agree on the verdict.

    mpiexec -n 2 python -m pytest -p no:cacheprovider --with-mpi -m mpi \\
        tests/runtime/test_shared_tensors_mpi.py
"""

import numpy as np
import pytest
import test_shared_tensors as shared
from helpers import assert_no_rank_has_problems, guarded, on_rank_zero
from mpi4py import MPI

import nntile_spmd as nt

pytestmark = pytest.mark.mpi(min_size=2)
COMM = MPI.COMM_WORLD


def train(graphs, comm):
    """STEPS of SGD: {parameter or "loss<step>": value} after them, on this rank."""
    cgs = [shared.compile_on(g, comm, "fsdp") for g in graphs]
    if len(cgs) == 3:
        cgs[1].share_tensors(cgs[0], shared.PARAMS)
        cgs[2].share_tensors(cgs[1], shared.PARAMS + shared.GRADS)
    for name, value in shared.start_values().items():
        cgs[0].bind_data(name, value)
    values = {}
    for step in range(shared.STEPS):
        x, t = shared.data(step)
        for cg in cgs[:2]:
            cg.bind_data("x", x)
            cg.bind_data("t", t)
        for cg in cgs:
            cg.execute()
            cg.check_stats()
        values[f"loss{step}"] = cgs[0].get_output("loss")
    values.update({name: cgs[0].get_output(name) for name in shared.PARAMS})
    return values


def problems():
    separate = train(shared.three_graphs(), None)     # MPI.COMM_WORLD
    together = train([shared.one_graph()], None)
    alone = on_rank_zero(COMM, lambda: train([shared.one_graph()], nt.SimulatedWorld(1)))
    found = []
    for reference, what in ((together, "one graph on these ranks"), (alone, "one rank")):
        for name, want in reference.items():
            error = float(np.max(np.abs(np.asarray(separate[name]) - want)))
            if not error <= 1e-12:
                found.append(f"{name} differs from {what} by {error:.3g}")
    return found


def test_three_graphs_sharing_train_as_one_on_every_rank():
    assert_no_rank_has_problems(COMM, guarded(problems))
