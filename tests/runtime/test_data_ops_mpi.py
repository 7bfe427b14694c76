"""The data-movement ops, batch_norm and log_scalar on real MPI ranks against NumPy:
a reshape view, a slice copy, concat, gather and scatter over uneven tiles, batch_norm's
gradient (the batch statistics reduced across ranks), and a logged scalar.

    mpiexec -n 3 python -m pytest --with-mpi -p no:cacheprovider \
        tests/runtime/test_data_ops_mpi.py

Every rank checks its part and the ranks all-reduce the verdict (helpers.collective_ok).
"""

import numpy as np
import pytest
from helpers import collective_ok, stat_problems
from mpi4py import MPI

import nntile_spmd as nt
from nntile_spmd import ops

pytestmark = pytest.mark.mpi(min_size=2)
COMM = MPI.COMM_WORLD
TIMEOUT = 60.0
SHAPE = (6, 4)


def build():
    g = nt.LogicalGraph("data_mpi")
    x = g.tensor(list(SHAPE), "x", "fp64", external=True)
    h = ops.scale(x, "h", 2.0)
    ops.scale(ops.reshape(h, "r", [3, 8]), "r3", 3.0).mark_output()      # a view
    ops.slice(h, "s", 1, 1, 3).mark_output()                             # a copy
    ops.concat([x, ops.slice(x, "x0", 0, 0, 2)], "c", axis=0).mark_output()
    ops.scatter(ops.gather(x, "whole"), "back").mark_output()
    gamma = g.tensor([SHAPE[0]], "gamma", "fp64", requires_grad=True, persistent=True)
    beta = g.tensor([SHAPE[0]], "beta", "fp64", requires_grad=True, persistent=True)
    y = ops.batch_norm(x, gamma, beta, "bn", axis=0).mark_output()
    loss = ops.mse_loss(y, g.tensor(list(SHAPE), "target", "fp64", external=True), "loss")
    ops.log_scalar(loss, "loss_value")
    grads = nt.grad(g, loss, [gamma, beta])
    return g, [grad.name for grad in grads]


def batch_norm_numpy(x, gamma, beta):
    mean = x.mean(axis=1, keepdims=True)
    normalized = (x - mean) / np.sqrt(((x - mean) ** 2).mean(axis=1, keepdims=True) + 1e-5)
    return normalized * gamma[:, None] + beta[:, None], normalized


def check(preset):
    graph, grad_names = build()
    cg = nt.compile(graph, distribution=preset, recv_timeout=TIMEOUT,
                    tiling=nt.TilingStrategy.explicit({"x": [6, 1], "r": [3, 2],
                                                       "s": [None, 1], "back": [4, 3]}))
    rng = np.random.default_rng(12)                 # the same arrays on every rank
    values = {"x": rng.standard_normal(SHAPE), "target": rng.standard_normal(SHAPE),
              "gamma": rng.standard_normal(SHAPE[0]), "beta": rng.standard_normal(SHAPE[0])}
    for name, array in values.items():
        cg.bind_data(name, array)
    cg.execute()
    x = values["x"]
    y, normalized = batch_norm_numpy(x, values["gamma"], values["beta"])
    dy = 2.0 * (y - values["target"])
    expected = {"r3": 6.0 * x.reshape(3, 8, order="F"), "s": 2.0 * x[:, 1:3],
                "c": np.concatenate([x, x[:2]]), "back": x, "bn": y,
                grad_names[0]: (dy * normalized).sum(axis=1), grad_names[1]: dy.sum(axis=1)}
    problems = stat_problems(cg)
    if cg.plan.views.names != {"r"}:
        problems.append(f"views {sorted(cg.plan.views.names)}, expected ['r']")
    for name, want in expected.items():
        got = cg.get_output(name)
        if not np.allclose(got, want, rtol=1e-10, atol=1e-10):
            problems.append(f"{name}: max error {np.max(np.abs(got - want))}")
    logged = cg.logged_scalars()["loss_value"]
    if not np.isclose(logged, ((y - values["target"]) ** 2).sum(), rtol=1e-12):
        problems.append(f"logged loss {logged}")
    return problems


@pytest.mark.parametrize("preset", ["single", "ddp", "fsdp", "tp"])
def test_data_ops_on_mpi_ranks(preset):
    try:
        problems = check(preset)
    except Exception as error:   # noqa: BLE001 - reported through the verdict
        problems = [f"{type(error).__name__}: {error}"]
    assert collective_ok(COMM, not problems), problems
