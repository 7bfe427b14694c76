"""Tile exchange between two ranks by CPU time: execute() vs hand-written mpi4py.

bench_exchange.py's graph (x on rank 0, y = copy(x) on rank 1, 64 MiB in tiles of
--tile-kib) with its references, timed by wall clock (max over ranks) and by the CPU
time of both ranks summed. On a shared machine the wall clock of a 2-rank exchange
moves by 10-30 % between runs, while the CPU the ranks spend moves by a few percent:
the CPU ratio is the one to compare across commits (run the same command with
PYTHONPATH naming each checkout). Best of --repeat interleaved runs after a warm-up:

  raw+copy   Isend all on rank 0; rank 1 keeps 8 Irecvs posted (the executor's window)
             and copies each tile into y as it arrives
  execute    cg.execute()
  raw        the same exchange without the copy
  exchange   execute() of a second compile of the graph whose copy kernel is a no-op
  ratios     raw+copy / execute and raw / exchange (>= 1: ours is as fast)

    PYTHONPATH=. mpiexec -n 2 python benchmarks/bench_exchange_cpu.py --tile-kib 64 4096 65536
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from mpi4py import MPI

import nntile_spmd as nt

WINDOW = 8
TOTAL_BYTES = 64 << 20


def build(elems, tile):
    g = nt.LogicalGraph("exchange")
    x = g.tensor([elems], "x", dtype="fp32", external=True)
    y = g.tensor([elems], "y", dtype="fp32")
    nt.ops.copy(x, y)
    y.mark_output()
    dist = {"x": nt.TileDistribution.on_rank(0), "y": nt.TileDistribution.on_rank(1)}
    return nt.compile(g, tiling=nt.TilingStrategy.manual({"x": [tile]}), distribution=dist,
                      threads=1)


def measure(comm, function):
    """(wall seconds, max over ranks; CPU seconds, summed over ranks)."""
    comm.Barrier()
    cpu, start = time.process_time(), time.perf_counter()
    function()
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    return comm.allreduce(wall, op=MPI.MAX), comm.allreduce(cpu, op=MPI.SUM)


def one_size(comm, tile_kib, repeat):
    rank, tile, elems = comm.rank, tile_kib * 256, TOTAL_BYTES // 4
    count = elems // tile
    data = np.arange(elems, dtype=np.float32)
    cg, stub = build(elems, tile), build(elems, tile)
    # set before stub's first execute: an execute indexes its kernels once
    stub.device.kernels = dict(stub.device.kernels, copy=lambda x, y: None)
    for compiled in (cg, stub):
        compiled.bind_data("x", data)
    copy = cg.device.kernels["copy"]
    bufs = [data[i * tile:(i + 1) * tile].copy() for i in range(count)]
    out = np.empty(elems, np.float32)

    def raw(with_copy):
        if rank == 0:
            MPI.Request.Waitall([comm.Isend([b, MPI.BYTE], dest=1, tag=7) for b in bufs])
            return
        requests = [comm.Irecv([b, MPI.BYTE], source=0, tag=7) for b in bufs[:WINDOW]]
        for index in range(count):
            requests[index].Wait()
            if with_copy:
                copy(bufs[index], out[index * tile:(index + 1) * tile])
            if index + WINDOW < count:
                requests.append(comm.Irecv([bufs[index + WINDOW], MPI.BYTE], source=0, tag=7))

    functions = {"raw+copy": lambda: raw(True), "execute": cg.execute,
                 "raw": lambda: raw(False), "exchange": stub.execute}
    times = {name: [] for name in functions}
    for index in range(repeat + 1):             # interleaved; run 0 is a warm-up
        for name, function in functions.items():
            result = measure(comm, function)
            if index:
                times[name].append(result)
    ok = bool(np.array_equal(cg.get_output("y"), data))
    best = {name: (min(w for w, _ in values), min(c for _, c in values))
            for name, values in times.items()}
    return count, best, ok


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tile-kib", type=int, nargs="+", default=[64, 4096, 65536])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    comm = MPI.COMM_WORLD
    if comm.size != 2:
        raise SystemExit("bench_exchange_cpu: run it on 2 ranks (mpiexec -n 2)")
    rows = [(kib, *one_size(comm, kib, args.repeat)) for kib in args.tile_kib]
    if comm.rank:
        return
    print(f"{'tile':>9} {'tiles':>5} | wall ms: {'raw+copy':>8} {'execute':>8} {'raw':>7} "
          f"{'exchange':>8} | cpu ms: {'raw+copy':>8} {'execute':>8} {'raw':>7} "
          f"{'exchange':>8} | ratios wall e2e/exch, cpu e2e/exch | ok")
    for kib, count, best, ok in rows:
        wall = [best[name][0] * 1e3 for name in ("raw+copy", "execute", "raw", "exchange")]
        cpu = [best[name][1] * 1e3 for name in ("raw+copy", "execute", "raw", "exchange")]
        print(f"{kib:>5} KiB {count:>5} | {'':9}" + " ".join(f"{v:>8.1f}" for v in wall) +
              f" | {'':8}" + " ".join(f"{v:>8.1f}" for v in cpu) +
              f" | {wall[0] / wall[1]:.3f} {wall[2] / wall[3]:.3f}, "
              f"{cpu[0] / cpu[1]:.3f} {cpu[2] / cpu[3]:.3f} | {ok}")
    print(f"best of {args.repeat} interleaved runs; cpu = both ranks' process time summed")


if __name__ == "__main__":
    main()
