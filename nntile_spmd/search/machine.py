"""Search layer: the machine model a search prices candidates on: a file, a
MachineModel, or a quick calibration inside the job (seconds, not the minutes of
`python -m nntile_spmd.calibrate`), which every rank then shares.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..runtime.thread_budget import threads_from_env
from ..simulate.machine import MachineModel, MessageCost

# Small versions of the calibration's two workloads (simulate/workloads.py's functions,
# by name: that module imports the models), each at a large and a small tile size (two
# points per op type separate the cost per task from the cost per FLOP).
QUICK_WORKLOADS = (("mlp_workload", dict(sizes=(256, 512, 10), batch=128)),
                   ("gpt2_workload", dict(n_layer=1, n_embd=64, n_head=2, batch=2, seq=32,
                                          vocab=128)))
QUICK_TILE_BYTES = (1 << 18, 1 << 13)
QUICK_STEPS = 2


def quick_calibrate(log=None, threads=None, core_sharing="own", cores=None) -> MachineModel:
    """Kernel rates and the executor's cost per task from one-rank steps of small
    models, on `threads` BLAS and numba threads (default: every core), the budget the
    runtime gives each rank of the job; latency, bandwidth and the CPU of messages
    keep MachineModel's defaults (measure_messages measures them where the job has
    two MPI ranks)."""
    # only a calibration loads these: `import nntile_spmd` loads no numba, no models
    import numba
    import threadpoolctl

    from ..simulate import workloads
    from ..simulate.calibrate import fit_rates, measure_ops
    cores = cores or usable_cores()
    threads = threads or cores
    rows, tasks, outside = [], 0, 0.0
    numba_threads = numba.get_num_threads()
    try:
        with threadpoolctl.threadpool_limits(limits=threads):
            numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
            for name, sizes in QUICK_WORKLOADS:
                workload = getattr(workloads, name)(**sizes)
                for tile_bytes in QUICK_TILE_BYTES:
                    measured, count, seconds = measure_ops(workload, tile_bytes, QUICK_STEPS)
                    rows += measured
                    tasks, outside = tasks + count, outside + seconds
    finally:
        numba.set_num_threads(numba_threads)
    op_types = {op_type: {str(threads): rate} for op_type, rate in fit_rates(rows).items()}
    model = MachineModel(cores=cores, task_overhead_s=max(0.0, outside / max(1, tasks)),
                         op_types=op_types, core_sharing=core_sharing,
                         source="nntile_spmd.search quick calibration")
    if log:
        log(f"quick calibration: {len(op_types)} op types, {tasks} tasks measured on "
            f"{threads} thread(s); cores {core_sharing}")
    return model


def usable_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else \
        os.cpu_count()


def machine_for(world, machine=None, log=None) -> MachineModel:
    """`machine` as a MachineModel (a path is loaded); None: rank 0 of the job
    calibrates quickly, at the threads the runtime gives each rank, and every rank
    takes its model, so all rank the same way."""
    if isinstance(machine, MachineModel):
        return machine
    if isinstance(machine, (str, Path)):
        return MachineModel.load(machine)
    if machine is not None:
        raise TypeError(f"autoplan: machine must be a MachineModel or a machine file "
                        f"path, got {type(machine).__name__}")
    if world.runs_every_rank or not world.executes:
        # one process planning for a job elsewhere: a core (or more) per rank there
        cores = usable_cores()
        threads = threads_from_env() or max(1, cores // world.size)
        return quick_calibrate(log, threads) if world.rank == 0 else None
    cores, threads, sharing = node_layout(world.comm)
    calibrated = quick_calibrate(log, threads, sharing, cores) if world.rank == 0 else None
    if world.size > 1:
        messages = measure_messages(world.comm)
        if calibrated is not None:
            for name, value in messages.items():
                setattr(calibrated, name, value)
            if log:
                log(f"messages between ranks 0 and 1: {messages}")
    return world.agree(calibrated, "the quick calibration of rank 0")[0]


def node_layout(comm) -> tuple:
    """(the node's cores, a rank's threads, core sharing) of this MPI job, as the
    runtime budgets them (runtime/threads.py): the threads are NNTILE_SPMD_THREADS or
    the node's cores over its ranks; the ranks share cores where they outnumber them,
    "bound" where each may run on fewer cores than the node has (collective)."""
    from mpi4py import MPI      # only an MPI job gets here
    node = comm.Split_type(MPI.COMM_TYPE_SHARED)
    try:
        masks = node.allgather(sorted(os.sched_getaffinity(0))
                               if hasattr(os, "sched_getaffinity") else
                               list(range(os.cpu_count())))
        ranks = node.Get_size()
    finally:
        node.Free()
    cores = len(set().union(*map(set, masks)))
    threads = threads_from_env() or max(1, cores // ranks)
    sharing = "own" if ranks <= cores else \
        "bound" if max(map(len, masks)) < cores else "node"
    return cores, threads, sharing


def measure_messages(comm) -> dict:
    """Latency, bandwidth and the CPU of a SEND and a RECV, measured between ranks 0
    and 1 of the job (simulate/pingpong.py's measurements, without its core binding);
    MachineModel fields, on rank 0 ({} elsewhere). Every rank must call it."""
    import numpy as np
    from mpi4py import MPI      # only an MPI job gets here

    from ..simulate.calibrate import fit_rates
    from ..simulate.pingpong import MESSAGE_SIZES, message_costs, round_trip
    pair = comm.Split(0 if comm.rank < 2 else MPI.UNDEFINED, comm.rank)
    if pair == MPI.COMM_NULL:
        return {}
    small, large = np.zeros(1, np.uint8), np.zeros(1 << 22, np.uint8)
    round_trip(pair, small, 10)
    latency = min(round_trip(pair, small, 50) for _ in range(3))
    bandwidth = large.nbytes / max(min(round_trip(pair, large, 3) for _ in range(2))
                                   - latency, 1e-9)
    costs = [message_costs(pair, nbytes, repeats=2) for nbytes in MESSAGE_SIZES]
    sends = pair.bcast([send for send, _ in costs], root=0)
    receives = pair.bcast([recv for _, recv in costs], root=1)
    pair.Free()
    if comm.rank != 0:
        return {}
    rates = fit_rates([("send", 1, n, s) for n, s in zip(MESSAGE_SIZES, sends)]
                      + [("recv", 1, n, s) for n, s in zip(MESSAGE_SIZES, receives)])
    return {"latency_s": latency, "bandwidth_bytes_per_s": bandwidth,
            "send_cpu": MessageCost(*rates["send"]), "recv_cpu": MessageCost(*rates["recv"])}
