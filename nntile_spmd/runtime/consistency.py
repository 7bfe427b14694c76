"""Runtime layer: cheap checks that every rank runs the same step on the same data.

SPMD has no leader to notice a rank that skipped an execute(), ran other phases,
or was given different "replicated" data: its messages would silently match
another step's. Each execute therefore starts with one small allgather of a
fingerprint (execute counter, phases, hash of the data bound with bind_data, hash of
the runtime scalars' values: a learning rate set on one rank only would make the
"replicated" weights differ silently), and a mismatch raises on every rank before any
tile moves. Imports no mpi4py.
"""

from __future__ import annotations

import zlib
from typing import NamedTuple

import numpy as np

FIELDS = ("execute counter", "phases", "data bound with bind_data", "runtime scalars")


class RankState(NamedTuple):
    """What a rank's fingerprint hashes, in full: gathered only when fingerprints differ,
    to say what differs."""

    executes: int
    phases: object
    bound: dict      # tensor name -> hash of the array last bound with bind_data
    scalars: dict    # runtime scalar name -> value


def data_hash(array) -> int:
    """crc32 of the array's values (C order): one pass, cheap next to copying them in."""
    array = np.asarray(array)
    return zlib.crc32(np.ascontiguousarray(array).view(np.uint8).reshape(-1))


def text_hash(text: str) -> int:
    return zlib.crc32(text.encode())


class RankAgreement:
    """Counts executes and remembers the hash of every tensor bound with bind_data."""

    def __init__(self, graph_name):
        self.graph_name = graph_name
        self.executes = 0
        self.bound = {}     # tensor name -> hash of the whole array last bound

    def record_bind(self, name, array):
        self.bound[name] = data_hash(array)

    def fingerprint(self, phases_key, scalars) -> list:
        bound = text_hash(repr(sorted(self.bound.items())))
        # repr of a float is exact, so two values hash alike only if they are equal
        return [self.executes, text_hash(repr(phases_key)), bound,
                text_hash(repr(sorted(scalars.items())))]

    def verify(self, world, phases_key, scalars):
        """Raise on every rank if any rank's fingerprint differs (MPI worlds only);
        `scalars` is {runtime scalar name: value} (runtime/scalars.ScalarTable)."""
        if not world.executes or world.runs_every_rank or world.size == 1:
            return      # one process derived every fingerprint: nothing to compare
        mine = self.fingerprint(phases_key, scalars)
        every = world.check_fingerprint(
            mine, f"the start of execute #{self.executes} (fingerprint check)")
        differing = [(rank, FIELDS[field]) for rank in range(world.size)
                     for field in range(len(FIELDS)) if every[rank][field] != every[0][field]]
        if not differing:
            return
        details = world.agree(RankState(self.executes, phases_key, self.bound, dict(scalars)),
                              "the details of a fingerprint mismatch")
        raise RuntimeError(describe_mismatch(self.graph_name, differing, details))


def describe_mismatch(graph_name, differing, details) -> str:
    """Which rank differs from rank 0 in what (names the tensors bound differently)."""
    lines = [MISMATCH_LINES[field](rank, details[rank], details[0])
             for rank, field in differing]
    return (f"execute of graph {graph_name!r}: the ranks diverged ({'; '.join(lines)}). A rank "
            "skipped an execute(), ran other phases, was given different data or set a "
            "runtime scalar (set_scalar) to another value; every rank must make the same "
            "calls with the same replicated data and scalars.")


def different_keys(mine: dict, rank0: dict) -> list:
    return sorted(name for name in set(mine) | set(rank0) if mine.get(name) != rank0.get(name))


def describe_bound(rank, mine, rank0) -> str:
    return (f"rank {rank} bound different data than rank 0 for "
            f"{different_keys(mine.bound, rank0.bound)}")


def describe_scalars(rank, mine, rank0) -> str:
    return "; ".join(f"runtime scalar {name!r} is {mine.scalars.get(name)!r} on rank {rank} "
                     f"but {rank0.scalars.get(name)!r} on rank 0"
                     for name in different_keys(mine.scalars, rank0.scalars))


def describe_step(rank, mine, rank0) -> str:
    return (f"rank {rank} is at execute #{mine.executes} with phases {mine.phases}, rank 0 "
            f"at execute #{rank0.executes} with phases {rank0.phases}")


# fingerprint field -> (rank, its RankState, rank 0's) -> what differs, in words
MISMATCH_LINES = {"execute counter": describe_step, "phases": describe_step,
                  "data bound with bind_data": describe_bound,
                  "runtime scalars": describe_scalars}


def check_same_on_all_ranks(world, what: str, value):
    """Raise ValueError on every rank unless every rank passed an equal `value` (small,
    picklable: a seed, dataset shapes); one allgather."""
    values = world.agree(value, what)
    differ = [rank for rank, theirs in enumerate(values) if theirs != values[0]]
    if differ:
        raise ValueError(f"{what} must be the same on every rank: rank 0 has {values[0]!r}, "
                         + ", ".join(f"rank {rank} has {values[rank]!r}" for rank in differ))
