"""Ping-pong between ranks 0 and 1 (run under mpiexec -n 2): writes "latency
bandwidth" (seconds, bytes per second) to the file named by argv[1]."""

import sys
import time

import numpy as np
from mpi4py import MPI


def round_trip(comm, buffer, repeats) -> float:
    peer = 1 - comm.rank
    comm.Barrier()
    start = time.perf_counter()
    for _ in range(repeats):
        if comm.rank == 0:
            comm.Send(buffer, peer)
            comm.Recv(buffer, peer)
        else:
            comm.Recv(buffer, peer)
            comm.Send(buffer, peer)
    return (time.perf_counter() - start) / repeats / 2       # one way


def main():
    comm = MPI.COMM_WORLD
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    small, large = np.zeros(1, np.uint8), np.zeros(1 << 24, np.uint8)
    round_trip(comm, small, 10)
    latency = min(round_trip(comm, small, repeats) for _ in range(3))
    large_s = min(round_trip(comm, large, 5) for _ in range(3))
    bandwidth = large.nbytes / max(large_s - latency, 1e-9)
    if comm.rank == 0:
        with open(sys.argv[1], "w") as out:
            out.write(f"{latency} {bandwidth}\n")


if __name__ == "__main__":
    main()
