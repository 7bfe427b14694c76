"""Simulator: measure this machine's constants into a MachineModel file.

    python -m nntile_spmd.calibrate [--out machine.json]

Kernel rates: training steps of the MLP and a small GPT-2 run in one process at
several tile sizes and BLAS/numba thread counts; for every op the executor's clock
gives (tasks, work, seconds) in the fastest of several steps, and per op type a
non-negative least-squares fit of seconds = a * tasks + b * work (relative errors
weighted equally) gives the per-task cost a and the per-unit cost b. The
executor's own cost per task is what its clock saw outside the kernels. Latency
and bandwidth come from a ping-pong between two MPI ranks on this machine, and
the CPU time of a SEND and a RECV from the runtime's transport posting and
completing tiles of several sizes. Only with --shared-cores (a machine that will run
more ranks than it has cores, bound to them: MachineModel.core_sharing "bound"): the
scheduler's turn on a shared core from two busy processes bound to one core, and
what a core switch costs from the GPT-2 step on two ranks sharing a core against two
ranks on a core each (shared_core.py).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from collections import defaultdict

import numpy as np
import threadpoolctl

from ..plan.instructions import Exec
from ..plan.tiling import TilingStrategy
from ..runtime.simulated import SimulatedWorld
from ..runtime.stats import KERNEL_S, TASKS
from .machine import FUSED, MachineModel, MessageCost, op_type_of, task_work
from .shared_core import switch_penalty
from .turns import measure_turn
from .workloads import WORKLOADS

TILE_BYTES = (1 << 20, 1 << 16)      # the default tiles, and small ones (many tasks)


class RecordingWorld(SimulatedWorld):
    """A one-rank simulated world that keeps the executors of the last execute."""

    def run(self, executors):
        self.executors = executors
        return super().run(executors)


def measure_ops(workload, tile_bytes, steps, fuse=False):
    """[(op type, tasks, work, kernel seconds)] per op and (tasks, overhead seconds)
    of the fastest of `steps` executes after one warm-up.

    The fastest, not the sum: a shared machine (a VM whose neighbours come and go)
    runs the same step up to 1.4x slower for seconds at a time, and the replay
    predicts the undisturbed machine; bench_simulator takes its measurements the
    same way."""
    from ..runtime import compile as compile_graph
    world = RecordingWorld(1)
    # fuse=False: rates are fitted per op type, so every task must be one op's;
    # fuse=True measures the fused tasks (one op type, machine.FUSED)
    cg = compile_graph(workload.graph, comm=world, fuse=fuse,
                       tiling=TilingStrategy.auto(target_tile_bytes=tile_bytes))
    workload.bind_params(cg)
    rng = np.random.default_rng(0)
    op_type = {op.name: op.op_type for op in workload.graph.ops()}
    work = defaultdict(int)
    for instruction in cg.plan.program(0):
        if type(instruction) is Exec:
            work[instruction.op_name] += task_work(instruction, cg.plan.meta)
    fastest = None
    for step in range(steps + 1):
        workload.bind_batch(cg, rng)
        cg.execute()
        if step == 0:
            continue                  # numba compilation and first-touch allocation
        executor = world.executors[0]
        per_op = {name: (totals[TASKS], totals[KERNEL_S])
                  for name, totals in executor.per_op.items()}
        if fastest is None or executor.busy_s < fastest[0]:
            fastest = (executor.busy_s, per_op)
    busy_s, per_op = fastest
    rows = [(op_type_of(op_type, name), count, work[name], seconds)
            for name, (count, seconds) in per_op.items()]
    tasks = sum(count for count, _ in per_op.values())
    return rows, tasks, busy_s - sum(seconds for _, seconds in per_op.values())


def fit_rates(rows) -> dict:
    """{op type: [a, b]} from (op type, tasks, work, seconds) rows."""
    by_type = defaultdict(list)
    for op_type, tasks, work, seconds in rows:
        if tasks and seconds > 0:
            by_type[op_type].append((tasks, work, seconds))
    rates = {}
    for op_type, points in by_type.items():
        matrix = np.array([[t / s, w / s] for t, w, s in points])
        rhs = np.ones(len(points))
        if np.linalg.matrix_rank(matrix) < 2:          # one tile size: cost per unit only
            total_work = sum(w for _, w, _ in points)
            total_s = sum(s for _, _, s in points)
            rates[op_type] = [0.0, total_s / total_work] if total_work else \
                [total_s / sum(t for t, _, _ in points), 0.0]
            continue
        # imported here: scipy.optimize is the heaviest import of `import nntile_spmd`,
        # which every rank of every job pays, and only a calibration fits rates
        from scipy.optimize import nnls
        (a, b), _ = nnls(matrix, rhs)
        rates[op_type] = [float(a), float(b)]
    return rates


def measure_kernels(workloads, threads_list, steps, log=print):
    op_types = defaultdict(dict)
    all_tasks, all_outside = 0, 0.0
    for threads in threads_list:
        rows = []
        with threadpoolctl.threadpool_limits(limits=threads):
            import numba
            numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
            for workload in workloads:
                for tile_bytes in TILE_BYTES:
                    measured, tasks, outside = measure_ops(workload, tile_bytes, steps)
                    rows += measured
                    all_tasks, all_outside = all_tasks + tasks, all_outside + outside
                    log(f"  {workload.name}, {threads} thread(s), tiles ~{tile_bytes} B: "
                        f"{tasks} tasks per step")
                    # compile(fuse=True) plans: the rate of the fused chains
                    fused, _, _ = measure_ops(workload, tile_bytes, steps, fuse=True)
                    rows += [row for row in fused if row[0] == FUSED]
        for op_type, rate in fit_rates(rows).items():
            op_types[op_type][str(threads)] = rate
    return dict(op_types), all_outside / max(1, all_tasks)


def run_on_two_ranks(module, *args, binding=()) -> list:
    """Run `python -m module OUT *args` on two MPI ranks of this machine (mpiexec,
    with `binding` options) and return the numbers it wrote to OUT."""
    from ..launch import find_mpiexec
    with tempfile.TemporaryDirectory() as folder:
        out = os.path.join(folder, "out.txt")
        subprocess.run([find_mpiexec() or "mpiexec", *binding, "-n", "2", sys.executable,
                        "-m", module, out, *map(str, args)], check=True, timeout=300)
        return [float(value) for value in open(out).read().split()]


def ping_pong(repeats=200) -> dict:
    """Latency, bandwidth and the CPU cost of a SEND and a RECV between two MPI
    ranks here (pingpong.py, via mpiexec), as MachineModel fields."""
    latency, bandwidth, send_a, send_b, recv_a, recv_b, share = run_on_two_ranks(
        "nntile_spmd.simulate.pingpong", repeats)
    return {"latency_s": latency, "bandwidth_bytes_per_s": bandwidth,
            "send_cpu": MessageCost(send_a, send_b), "recv_cpu": MessageCost(recv_a, recv_b),
            "spin_share": share}


def calibrate(workload_names=("mlp", "gpt2"), threads_list=None, steps=8,
              with_mpi=True, log=print, shared_cores=False) -> MachineModel:
    """This machine's MachineModel; `shared_cores`: also the constants of ranks bound
    to shared cores, and core_sharing "bound"."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    threads_list = threads_list or sorted({1, cores})
    workloads = [WORKLOADS[name]() for name in workload_names]
    log(f"calibrating kernels on {cores} core(s): {', '.join(workload_names)}")
    op_types, overhead = measure_kernels(workloads, threads_list, steps, log)
    model = MachineModel(cores=cores, task_overhead_s=max(0.0, overhead), op_types=op_types,
                         source=f"nntile_spmd.calibrate on {os.uname().nodename}")
    if shared_cores:
        model.core_sharing, model.core_turn_s = "bound", measure_turn()
        log(f"  two processes computing on one core take turns of "
            f"{model.core_turn_s * 1e3:.2f} ms")
    if with_mpi:
        for name, value in ping_pong().items():
            setattr(model, name, value)
        log(f"  MPI: latency {model.latency_s * 1e6:.1f} us, "
            f"bandwidth {model.bandwidth_bytes_per_s / 1e9:.2f} GB/s; a SEND costs "
            f"{model.send_cpu.fixed_s * 1e6:.1f} us + "
            f"{model.send_cpu.per_byte_s * 2**20 * 1e6:.0f} us/MiB of CPU, a RECV "
            f"{model.recv_cpu.fixed_s * 1e6:.1f} us + "
            f"{model.recv_cpu.per_byte_s * 2**20 * 1e6:.0f} us/MiB")
    if with_mpi and shared_cores:
        log(f"  a rank waiting on a shared core spins {model.spin_share:.2f} of its "
            "core-mate's lead in CPU time")
        model.switch_penalty_s = switch_penalty(model)
        log(f"  a rank back on a shared core after another rank's work loses "
            f"{model.switch_penalty_s * 1e6:.1f} us reloading its caches")
    return model


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="machine.json")
    parser.add_argument("--workloads", nargs="+", default=["mlp", "gpt2"],
                        choices=sorted(WORKLOADS))
    parser.add_argument("--steps", type=int, default=8,
                        help="executes per configuration; the fastest is kept")
    parser.add_argument("--no-mpi", action="store_true", help="keep the default latency "
                        "and bandwidth instead of measuring them with two MPI ranks")
    parser.add_argument("--shared-cores", action="store_true", help="also measure how "
                        "ranks bound to shared cores take turns (a machine that will run "
                        "more ranks than cores, e.g. a small test VM); the file then "
                        "replays them so (core_sharing 'bound')")
    args = parser.parse_args(argv)
    model = calibrate(args.workloads, steps=args.steps, with_mpi=not args.no_mpi,
                      shared_cores=args.shared_cores)
    model.save(args.out)
    print(f"wrote {args.out}: {len(model.op_types)} op types, task overhead "
          f"{model.task_overhead_s * 1e6:.2f} us")
