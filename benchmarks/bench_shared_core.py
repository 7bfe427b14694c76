"""Two ranks on one core: does a rank waiting for a message leave the core to the other?

Both ranks bind themselves to the same core. Rank 0 computes (numpy matmuls, one
BLAS thread) for two seconds. In the first rank 1 sleeps; in the second rank 0
sends it a tile every 5 ms and rank 1 waits for each as the runtime waits
(MPITransport.wait_recv: test, sched_yield, for up to executor.SPIN_SECONDS before
it sleeps). Rank 0's matmuls in each second: how much of the core the waiting rank
takes. Then the
ping-pong the calibration runs (simulate/pingpong.spin_share): rank 0 computes
250 us a round and sends a tile, rank 1 sends it back; the CPU time of rank 1 over
rank 0's is the spin share the simulator uses (1: the waiting rank spins off the
other's lead; 0: its yields hand the core over).

Linux's scheduler shares a core fairly between autogroups (one per session) when
`/proc/sys/kernel/sched_autogroup_enabled` is 1, and mpiexec starts every rank in a
session of its own, so there a yield does not hand the core to the other rank.

    mpiexec -n 2 python benchmarks/bench_shared_core.py
"""

from __future__ import annotations

import time

import numpy as np
import threadpoolctl
from mpi4py import MPI

from nntile_spmd.runtime.mpi_world import MPITransport
from nntile_spmd.simulate.pingpong import on_one_core, spin_share

HALF_S = 1.0
EVERY_S = 0.005


def matmuls_until(end, matrix, out) -> int:
    done = 0
    while time.perf_counter() < end:
        np.matmul(matrix, matrix, out=out)
        done += 1
    return done


def main():
    comm = MPI.COMM_WORLD
    if comm.size != 2:
        raise SystemExit("run with mpiexec -n 2")
    threadpoolctl.threadpool_limits(1)
    with on_one_core(comm):
        asleep, waiting, share = measure(comm)
    if comm.rank == 0:
        with open("/proc/sys/kernel/sched_autogroup_enabled") as flag:
            autogroup = flag.read().strip()
        print(f"autogroups {'on' if autogroup == '1' else 'off'}; this rank's "
              f"{open('/proc/self/autogroup').read().strip()}")
        print(f"rank 0's matmuls (96x96) per {HALF_S:g} s on the core it shares with rank 1: "
              f"{asleep} while rank 1 sleeps, {waiting} while it waits for a tile every "
              f"{EVERY_S * 1e3:g} ms as the runtime does ({asleep / waiting:.2f}x slower)")
        print(f"ping-pong on the core, rank 0 computing 250 us a round: rank 1's CPU time "
              f"over rank 0's (spin share) {share:.2f}")


def measure(comm):
    """(rank 0's matmuls with rank 1 asleep, and waiting; the spin share), on rank 0."""
    transport = MPITransport(comm, timeout=60.0)
    matrix = np.random.default_rng(0).random((96, 96), dtype=np.float32)
    out, token = np.empty_like(matrix), np.zeros(1, np.float32)
    matmuls_until(time.perf_counter() + 0.05, matrix, out)     # warm up
    comm.Barrier()
    start = time.perf_counter()
    if comm.rank == 0:
        asleep = matmuls_until(start + HALF_S, matrix, out)
        waiting, tag, token[0] = 0, 0, 1.0
        while time.perf_counter() < start + 2 * HALF_S:
            waiting += matmuls_until(time.perf_counter() + EVERY_S, matrix, out)
            transport.wait_send(transport.post_send(1, tag, token))
            tag += 1
        token[0] = 0.0                                  # the last one
        transport.wait_send(transport.post_send(1, tag, token))
    else:
        asleep = waiting = None
        time.sleep(HALF_S)
        tag, token[0] = 0, 1.0
        while token[0]:
            handle = transport.post_recv(0, tag, token)
            transport.wait_recv(handle, lambda: "rank 0's token")
            transport.finish_recv(handle, token)
            tag += 1
    return asleep, waiting, spin_share(comm)


if __name__ == "__main__":
    main()
