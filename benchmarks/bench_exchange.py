"""Point-to-point tile exchange: nntile_spmd execute() vs raw mpi4py Send/Recv (2 ranks).

Graph: x [T*count] fp32 owned by rank 0 (external input), y = copy(x) owned by
rank 1 (output). One execute() moves every tile of x from rank 0 to rank 1
(SEND on rank 0, RECV + copy kernel + FREE on rank 1), `count` tiles of T bytes.
The reference, in the same run and on the same communicator pair, sends the same
bytes as the same number of messages with raw buffer-based mpi4py: rank 0
`comm.Send(buf)` per tile, rank 1 `comm.Recv(buf)` into preallocated buffers.

A second reference does what the executor does with raw mpi4py: rank 0 posts
every `Isend` at once, rank 1 keeps `window` (8) `Irecv`s posted into
preallocated buffers and completes them in order.

Columns (GB/s = 1e9 bytes/s; time = max over both ranks; best of --repeat
interleaved runs after a warm-up):
  Send/Recv     raw blocking mpi4py Send/Recv, preallocated buffers
  Isend/Irecv   raw non-blocking, windowed, preallocated buffers
  execute       nntile_spmd execute() end to end (includes rank 1's copy kernel)
  transport     execute minus the copy kernels (measured on rank 1 by running
                the same copy kernel on tiles of the same size): the exchange itself
  ratio         best raw time / (execute - copy) time   (goal >= 0.95)
  e2e ratio     best raw time / execute time

Command (from the repository root):

    PYTHONPATH=. /work/venv/bin/mpiexec -n 2 /work/venv/bin/python benchmarks/bench_exchange.py
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from mpi4py import MPI

import nntile_spmd as nt

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


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes-kib", type=int, nargs="+",
                        default=[64, 256, 1024, 4096, 16384, 65536])
    parser.add_argument("--total-mib", type=int, default=64,
                        help="bytes per execute (at least one tile)")
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    world = MPI.COMM_WORLD
    if world.size != 2:
        raise SystemExit("run under: mpiexec -n 2 python benchmarks/bench_exchange.py")
    rank = world.rank
    comm = world.Dup()          # the raw reference's own communicator
    rows = []
    for size_kib in args.sizes_kib:
        tile_bytes = size_kib * KIB
        count = max(1, args.total_mib * 1024 // size_kib)
        cg, elems = build(tile_bytes, count)
        data = np.arange(elems * count, dtype=np.float32)
        cg.bind_data("x", data)
        bufs = [np.empty(elems, dtype=np.float32) for _ in range(count)]
        if rank == 0:
            for index in range(count):
                bufs[index][:] = data[index * elems:(index + 1) * elems]

        def raw():
            if rank == 0:
                for buf in bufs:
                    comm.Send([buf, MPI.BYTE], dest=1, tag=7)
            else:
                for buf in bufs:
                    comm.Recv([buf, MPI.BYTE], source=0, tag=7)

        def raw_nonblocking():
            # what the executor does: every Isend posted at once, receives posted
            # `window` ahead, completed in order (window = the plan's, 8)
            if rank == 0:
                MPI.Request.Waitall([comm.Isend([buf, MPI.BYTE], dest=1, tag=7)
                                     for buf in bufs])
            else:
                window = cg.plan.window
                requests = [comm.Irecv([buf, MPI.BYTE], source=0, tag=7)
                            for buf in bufs[:window]]
                for index in range(count):
                    requests[index].Wait()
                    if index + window < count:
                        requests.append(comm.Irecv([bufs[index + window], MPI.BYTE],
                                                   source=0, tag=7))

        copy = cg.device.kernels["copy"]
        src, dst = np.ones(elems, np.float32), np.empty(elems, np.float32)

        def copies():
            if rank == 1:
                for _ in range(count):
                    copy(src, dst)

        t_raw, t_nb, t_exec, t_copy = [], [], [], []
        for index in range(args.repeat + 1):          # interleaved; run 0 is a warm-up
            r, n = timed(comm, raw), timed(comm, raw_nonblocking)
            e, c = timed(comm, cg.execute), timed(comm, copies)
            if index:
                t_raw.append(r)
                t_nb.append(n)
                t_exec.append(e)
                t_copy.append(c)
        ok = bool(np.array_equal(cg.get_output("y"), data))
        stats = cg.get_stats()
        plan_ok = world.allreduce(int(stats["peak_bytes"] == cg.memory_on_rank(rank) and
                                      stats["bytes_transferred"] ==
                                      cg.estimate_communication(rank)), op=MPI.MIN)
        total = tile_bytes * count
        exec_s, copy_s = min(t_exec), min(t_copy)
        raw_s = min(min(t_raw), min(t_nb))             # the faster raw variant
        rows.append((size_kib, count, total / min(t_raw) / 1e9, total / min(t_nb) / 1e9,
                     total / exec_s / 1e9,
                     total / (exec_s - copy_s) / 1e9, raw_s / (exec_s - copy_s),
                     raw_s / exec_s, ok and bool(plan_ok)))
        del cg
    if rank == 0:
        print(f"{'tile':>9} {'tiles':>5} {'Send/Recv':>9} {'Isend/Irecv':>11} "
              f"{'execute':>8} {'transport':>9} {'ratio':>6} {'e2e ratio':>9} {'ok':>5}"
              "   (GB/s; ratios against the faster raw variant)")
        for size_kib, count, raw_gb, nb_gb, exec_gb, transport_gb, ratio, e2e, ok in rows:
            label = f"{size_kib} KiB" if size_kib < 1024 else f"{size_kib // 1024} MiB"
            print(f"{label:>9} {count:>5} {raw_gb:>9.2f} {nb_gb:>11.2f} {exec_gb:>8.2f} "
                  f"{transport_gb:>9.2f} {ratio:>6.3f} {e2e:>9.3f} {str(ok):>5}")
        print(f"{args.total_mib} MiB per execute, best of {args.repeat} after a warm-up; "
              "ratio = raw / (execute - copy kernels); ok = y == x and plan == measurement")


if __name__ == "__main__":
    main()
