"""The in-job calibration of messages (search/machine.measure_messages) on real MPI
ranks: rank 0 gets positive latency and bandwidth and non-negative SEND/RECV costs,
the other ranks nothing; every rank returns (no rank left waiting); the node layout
the quick calibration prices on is the runtime's thread budget; autoplan's trials on real ranks:
    mpiexec -n 2 python -m pytest --with-mpi -p no:cacheprovider tests/search"""

import pytest
from helpers import collective_ok

import nntile_spmd as nt
from nntile_spmd.models import build_mlp
from nntile_spmd.search.machine import measure_messages, node_layout
from nntile_spmd.simulate import MachineModel
from nntile_spmd.train import add_optimizer

mpi4py = pytest.importorskip("mpi4py")
from mpi4py import MPI  # noqa: E402


@pytest.mark.mpi(min_size=2)
def test_messages_are_measured_between_ranks_0_and_1():
    comm = MPI.COMM_WORLD
    measured = measure_messages(comm)
    if comm.rank == 0:
        ok = (measured["latency_s"] > 0 and measured["bandwidth_bytes_per_s"] > 0
              and min(*measured["send_cpu"], *measured["recv_cpu"]) >= 0)
    else:
        ok = measured == {}
    assert collective_ok(comm, ok)


@pytest.mark.mpi(min_size=2)
def test_the_node_layout_is_the_runtimes_thread_budget():
    from nntile_spmd.runtime.threads import (default_blas_threads, ranks_outnumber_cores,
                                             threads_from_env)
    comm = MPI.COMM_WORLD
    cores, threads, sharing = node_layout(comm)
    crowded = ranks_outnumber_cores(comm)
    ok = (threads == (threads_from_env() or default_blas_threads(comm)) and cores >= 1
          and (sharing == "own") == (not crowded))
    assert collective_ok(comm, ok)


@pytest.mark.mpi(min_size=2)
def test_trials_run_the_first_candidates_and_every_rank_chooses_alike():
    """autoplan(trials=2) on real ranks: the first two candidates were run (a step
    time each, the same on every rank), the others were not, and every rank's list
    is the same, in the same order."""
    comm = MPI.COMM_WORLD
    model = build_mlp([12, 16, 5], 8, dtype="fp64")
    add_optimizer(model.graph, model.params, model.grads, "adam")
    candidates = nt.autoplan(model.graph, machine=MachineModel(), trials=2)
    mine = [(c.label, c.trial_step_s) for c in candidates]
    ok = (all(seconds > 0 for _, seconds in mine[:2])
          and all(seconds is None for _, seconds in mine[2:])
          and mine[0][1] <= mine[1][1])
    same = comm.allgather(mine) == [mine] * comm.size
    assert collective_ok(comm, ok and same)


@pytest.mark.mpi(min_size=2)
def test_auto_compile_runs_its_trials_with_the_callers_options_and_trains_as_one_rank():
    """compile(distribution="auto", deterministic=True) on real ranks, its trials
    compiled with those options: the chosen plan's loss equals one rank's."""
    import numpy as np
    comm = MPI.COMM_WORLD
    model = build_mlp([12, 16, 5], 8, dtype="fp64")
    add_optimizer(model.graph, model.params, model.grads, "adam")
    rng = np.random.default_rng(0)
    data = {**model.init_params(rng), "x": np.asfortranarray(rng.standard_normal((12, 8))),
            "y": rng.integers(0, 5, 8).astype(np.int64)}
    losses = []
    for world, distribution in ((None, "auto"), (nt.SimulatedWorld(1), "single")):
        cg = nt.compile(model.graph, comm=world, distribution=distribution,
                        deterministic=True, machine=MachineModel())
        for name, value in data.items():
            cg.bind_data(name, value)
        cg.execute()
        losses.append(float(np.asarray(cg.get_output(model.loss.name))))
    assert collective_ok(comm, abs(losses[0] - losses[1]) <= 1e-12 * abs(losses[1]))
