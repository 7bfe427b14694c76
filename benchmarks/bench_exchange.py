"""Point-to-point tile exchange: nntile_spmd execute() vs raw mpi4py Send/Recv (2 ranks).

Graph: x [T*count] fp32 owned by rank 0 (external input), y = copy(x) owned by
rank 1 (output). One execute() moves every tile of x from rank 0 to rank 1
(SEND on rank 0; RECV into a store buffer, copy kernel, FREE on rank 1): `count`
tiles of T bytes, 64 MiB per run by default. The references, in the same run,
send the same bytes as the same number of messages with raw buffer-based mpi4py
into preallocated buffers.

Columns (GB/s = 1e9 bytes/s; time = max over both ranks; best of --repeat
interleaved runs after a warm-up):
  Send/Recv    raw: rank 0 `comm.Send` per tile, rank 1 `comm.Recv`
  Isend/Irecv  raw, what the executor does: rank 0 posts every Isend at once,
               rank 1 keeps `window` (8) Irecvs posted and completes them in order
  exchange     nntile_spmd execute() with this graph's copy kernel stubbed out
               (a no-op), so the time is the framework's exchange itself:
               planning-free RECV/SEND/FREE, buffer allocation, MPI, bookkeeping
  ratio        faster raw / exchange   (goal >= 0.95)
  raw+copy     raw Isend/Irecv (windowed) plus the same copy of each tile into y
               on rank 1 as soon as it arrived: the same work as execute()
  execute      nntile_spmd execute() end to end, real copy kernel
  e2e ratio    raw+copy / execute

Command (from the repository root):

    PYTHONPATH=. /work/venv/bin/mpiexec -n 2 /work/venv/bin/python benchmarks/bench_exchange.py
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from mpi4py import MPI

import nntile_spmd as nt

from _common import CpuLoad, wait_for_quiet

KIB = 1024


def build(tile_bytes, count):
    elems = tile_bytes // 4
    g = nt.LogicalGraph("exchange")
    x = g.tensor([elems * count], "x", dtype="fp32", external=True)
    y = g.tensor([elems * count], "y", dtype="fp32")
    nt.ops.copy(x, y)
    y.mark_output()
    dist = {"x": nt.TileDistribution.on_rank(0), "y": nt.TileDistribution.on_rank(1)}
    cg = nt.compile(g, tiling=nt.TilingStrategy.manual({"x": [elems]}), distribution=dist,
                    threads=1)
    return cg, elems


def timed(comm, function):
    comm.Barrier()
    start = time.perf_counter()
    function()
    elapsed = time.perf_counter() - start
    return comm.allreduce(elapsed, op=MPI.MAX)


def windowed(comm, rank, bufs, window, after=None):
    """Raw non-blocking exchange: rank 0 posts every Isend, rank 1 keeps `window`
    Irecvs posted and completes them in order (calling after(index) on each)."""
    if rank == 0:
        MPI.Request.Waitall([comm.Isend([buf, MPI.BYTE], dest=1, tag=7) for buf in bufs])
        return
    requests = [comm.Irecv([buf, MPI.BYTE], source=0, tag=7) for buf in bufs[:window]]
    for index in range(len(bufs)):
        requests[index].Wait()
        if after is not None:
            after(index)
        if index + window < len(bufs):
            requests.append(comm.Irecv([bufs[index + window], MPI.BYTE], source=0, tag=7))


def measure_size(world, comm, size_kib, total_mib, repeat):
    """One row of the table: GB/s of every variant for tiles of `size_kib`."""
    rank = world.rank
    tile_bytes = size_kib * KIB
    count = max(1, total_mib * 1024 // size_kib)
    cg, elems = build(tile_bytes, count)
    data = np.arange(elems * count, dtype=np.float32)
    cg.bind_data("x", data)
    bufs = [np.empty(elems, dtype=np.float32) for _ in range(count)]
    if rank == 0:
        for index in range(count):
            bufs[index][:] = data[index * elems:(index + 1) * elems]
    window = cg.plan.window
    copy, y_ref = cg.device.kernels["copy"], np.empty(elems * count, dtype=np.float32)
    # the exchange alone: a second compile of the graph whose copy kernel is a no-op,
    # set before its first execute (an execute indexes the kernels once per program:
    # swapping them on the compiled graph between executes changed nothing, and the
    # "execute" column ran the stub too)
    stub_cg, _ = build(tile_bytes, count)
    stub_cg.device.kernels = dict(stub_cg.device.kernels, copy=lambda x, y: None)
    stub_cg.bind_data("x", data)

    def raw():
        if rank == 0:
            for buf in bufs:
                comm.Send([buf, MPI.BYTE], dest=1, tag=7)
        else:
            for buf in bufs:
                comm.Recv([buf, MPI.BYTE], source=0, tag=7)

    def copy_tile(index):
        copy(bufs[index], y_ref[index * elems:(index + 1) * elems])

    functions = {"raw": raw, "nb": lambda: windowed(comm, rank, bufs, window),
                 "stub": stub_cg.execute,
                 "raw_copy": lambda: windowed(comm, rank, bufs, window, copy_tile),
                 "exec": cg.execute}
    times = {name: [] for name in functions}
    for index in range(repeat + 1):          # interleaved; run 0 is a warm-up
        for name, function in functions.items():
            elapsed = timed(comm, function)
            if index:
                times[name].append(elapsed)
    ok = bool(np.array_equal(cg.get_output("y"), data))    # the last run used `copy`
    stats = cg.get_stats()
    plan_ok = world.allreduce(int(stats.peak_bytes == cg.memory_on_rank(rank) and
                                  stats.bytes_transferred ==
                                  cg.estimate_communication(rank)), op=MPI.MIN)
    total = tile_bytes * count
    best = {name: min(values) for name, values in times.items()}
    raw_s = min(best["raw"], best["nb"])           # the faster raw variant
    return (size_kib, count, total / best["raw"] / 1e9, total / best["nb"] / 1e9,
            total / best["stub"] / 1e9, raw_s / best["stub"],
            total / best["raw_copy"] / 1e9, total / best["exec"] / 1e9,
            best["raw_copy"] / best["exec"], ok and bool(plan_ok))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes-kib", type=int, nargs="+",
                        default=[64, 256, 1024, 4096, 16384, 65536])
    parser.add_argument("--total-mib", type=int, default=64,
                        help="bytes per execute (at least one tile)")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--no-wait", action="store_true",
                        help="do not wait for the machine to be idle first")
    args = parser.parse_args()
    world = MPI.COMM_WORLD
    if world.size != 2:
        raise SystemExit("run under: mpiexec -n 2 python benchmarks/bench_exchange.py")
    rank = world.rank
    comm = world.Dup()          # the raw reference's own communicator
    # every rank waits, sleeping (a rank spinning in a Barrier would keep a core busy)
    busy_before = wait_for_quiet() if not args.no_wait else float("nan")
    world.Barrier()
    with CpuLoad() as load:
        rows = [measure_size(world, comm, size_kib, args.total_mib, args.repeat)
                for size_kib in args.sizes_kib]
    others = load.others(world.allreduce(load.own))
    if rank == 0:
        print(f"machine busy before: {busy_before:.0%}; other processes during the runs: "
              f"{others:.0%} of all cores")
        print(f"{'tile':>9} {'tiles':>5} {'Send/Recv':>9} {'Isend/Irecv':>11} "
              f"{'exchange':>8} {'ratio':>6} {'raw+copy':>8} {'execute':>8} "
              f"{'e2e ratio':>9} {'ok':>5}")
        for row in rows:
            size_kib, count, *gbs, ok = row
            label = f"{size_kib} KiB" if size_kib < 1024 else f"{size_kib // 1024} MiB"
            cells = [f"{gbs[0]:>9.2f}", f"{gbs[1]:>11.2f}", f"{gbs[2]:>8.2f}",
                     f"{gbs[3]:>6.3f}", f"{gbs[4]:>8.2f}", f"{gbs[5]:>8.2f}", f"{gbs[6]:>9.3f}"]
            print(f"{label:>9} {count:>5} " + " ".join(cells) + f" {str(ok):>5}")
        print(f"GB/s = 1e9 B/s, {args.total_mib} MiB per run, best of {args.repeat} "
              "interleaved runs after a warm-up; ratio = best raw / exchange (goal >= 0.95); "
              "e2e ratio = raw+copy / execute; ok = y == x and plan == measurement")


if __name__ == "__main__":
    main()
