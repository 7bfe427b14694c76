"""The threaded executor on real MPI ranks (MPI calls stay on the executor thread):
an MLP train step in fp64 is bitwise the serial executor's on every rank, every preset,
and the bytes, FLOPs and in-order peak equal the plan.

    mpiexec -n 3 python -m pytest --with-mpi -p no:cacheprovider tests/runtime/test_threaded_mpi.py
"""

import numpy as np
import pytest
from helpers import collective_ok, guarded, stat_problems
from mpi4py import MPI

import nntile_spmd as nt
from nntile_spmd.models import mlp
from nntile_spmd.runtime import executor_threads
from nntile_spmd.train import add_optimizer

pytestmark = pytest.mark.mpi(min_size=2)
COMM = MPI.COMM_WORLD
SIZES, BATCH = (13, 24, 17, 5), 22


def step(preset, task_threads, problems):
    """Two AdamW steps; stats that differ from the plan join `problems` (no raise: every
    rank must go on to the next compile, which is collective)."""
    model = mlp.build_mlp(SIZES, BATCH, "fp64")
    add_optimizer(model.graph, model.params, model.grads, "adamw", lr=1e-2)
    cg = nt.compile(model.graph, distribution=preset, threads=task_threads,
                    task_threads=task_threads,
                    tiling=nt.TilingStrategy.manual({"x": [5, 7], "w2": [7, 10]}))
    rng = np.random.default_rng(3)
    for name, value in model.init_params(rng).items():
        cg.bind_data(name, value)
    cg.bind_data("x", rng.standard_normal((SIZES[0], BATCH)))
    cg.bind_data("y", rng.integers(0, SIZES[-1], BATCH))
    for _ in range(2):
        cg.execute()
    problems += stat_problems(cg)
    names = [model.loss.name] + model.param_names + [g.name for g in model.grads]
    return cg, {name: cg.get_output(name) for name in names}


@pytest.mark.parametrize("preset", ["single", "ddp", "fsdp", "tp"])
def test_threaded_steps_bitwise_equal_to_serial(preset, monkeypatch):
    monkeypatch.setattr(executor_threads, "INLINE_FLOPS", 0)   # every task on a worker

    def check():
        problems = []
        _, serial = step(preset, 1, problems)
        cg, threaded = step(preset, 2, problems)
        problems += [] if cg.task_threads == 2 else [f"task_threads {cg.task_threads}"]
        return problems + [f"rank {COMM.rank}: {name} differs" for name in serial
                           if not np.array_equal(serial[name], threaded[name])]
    problems = guarded(check)
    assert collective_ok(COMM, not problems), problems


def test_profile_gathers_every_rank(tmp_path_factory):
    """cg.profile() on real ranks: rank 0 writes one trace with every rank's tasks."""
    path = COMM.bcast(str(tmp_path_factory.mktemp("trace") / "trace.json")
                      if COMM.rank == 0 else None)

    def check():
        problems = []
        cg, _ = step("ddp", 2, problems)
        profile = cg.profile(path)
        mine = sum(t.tasks for t in cg.get_stats().by_op_type.values())
        counts = COMM.allgather(mine)
        tasks = [e for e in profile.trace["traceEvents"] if e.get("cat") == "task"]
        for rank, count in enumerate(counts):
            if sum(1 for e in tasks if e["pid"] == rank) != count:
                problems.append(f"rank {rank}: {count} tasks, trace differs")
        if COMM.rank == 0:
            import json
            with open(path) as file:
                if len(json.load(file)["traceEvents"]) != len(profile.trace["traceEvents"]):
                    problems.append("the file differs from the profile")
        return problems
    problems = guarded(check)
    assert collective_ok(COMM, not problems), problems
