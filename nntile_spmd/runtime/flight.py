"""Runtime layer: each rank's flight record, what it was doing when the job failed.

With $NNTILE_SPMD_FLIGHT_DIR set, a rank whose execute fails (a timeout, an error), a
collective that times out, an abort or a SIGTERM/SIGHUP writes rank<R>.json there:
where it was (the execute and graph), the instruction it was at (the tile, peer and
tag it waited for) and the instructions just before. Nothing is recorded while the
job runs: the executor's program and its program counter are the record, read only
on the failure path (executor.advance keeps the counter of a failed instruction), so
it costs nothing. `python -m nntile_spmd.flight DIR` merges the records
(nntile_spmd/flight.py). The folder must be this user's and writable by no one else,
and a record is written under a fresh random name then renamed
(nntile_spmd/private_files.py): in a shared folder a planted link named like the
temporary file redirected the record onto a file of the user's. Imports no mpi4py.
"""

from __future__ import annotations

import json
import os
import sys
import time
import weakref

from ..plan.instructions import Recv, Send, key_str
from ..private_files import UnsafeFolder, private_folder, write_private
from . import abnormal_end

ENV_VARIABLE = "NNTILE_SPMD_FLIGHT_DIR"
RECENT = 16            # instructions kept before the one the rank was at
_written = set()       # ranks whose first record this process wrote: the first is the cause
_latest_world = None   # weakref to the MPIWorld made last: where an abort happened


def remember_world(world) -> None:
    global _latest_world
    _latest_world = weakref.ref(world)


def latest_where() -> str:
    world = _latest_world() if _latest_world is not None else None
    return world.where if world is not None else "no compiled graph yet"


def directory():
    return os.environ.get(ENV_VARIABLE) or None


def instruction_record(instruction) -> dict:
    entry = {"kind": type(instruction).__name__, "text": str(instruction)}
    if type(instruction) in (Recv, Send):
        entry.update(tile=key_str(instruction.key), peer=instruction.peer,
                     tag=instruction.tag)
    return entry


def snapshot(rank, size, where, reason, executor=None) -> dict:
    record = {"rank": rank, "size": size, "where": where, "reason": reason,
              "time": time.time(), "pid": os.getpid()}
    if executor is not None:
        program, pc = executor.program, min(executor.pc, len(executor.program))
        record.update(pc=pc, length=len(program),
                      recent=[str(i) for i in program[max(0, pc - RECENT):pc]],
                      at=instruction_record(program[pc]) if pc < len(program) else None)
    return record


def record_failure(rank, size, where, reason, executor=None):
    """Write this rank's record (the first one of the process only); -> its path."""
    folder = directory()
    if folder is None or rank in _written:
        return None
    _written.add(rank)
    try:
        path = os.path.join(private_folder(folder, f"flight record folder (${ENV_VARIABLE})"),
                            f"rank{rank}.json")
        record = snapshot(rank, size, where, reason, executor)
        write_private(path, json.dumps(record, indent=1).encode())
        return path
    except UnsafeFolder as error:
        print(f"[rank {rank}] no flight record written: {error}", file=sys.stderr, flush=True)
        return None
    except OSError:
        return None        # a record must never hide the failure it describes


class Armed:
    """with Armed(world, executor): a signal or an abort during the block writes the
    record too (abnormal_end runs the clean-ups); free without $NNTILE_SPMD_FLIGHT_DIR."""

    def __init__(self, world, executor):
        self.world, self.executor = world, executor
        self.key = ("flight record", world.rank) if directory() else None

    def __enter__(self):
        if self.key is not None:
            world, executor = self.world, self.executor
            abnormal_end.register(self.key, lambda: record_failure(
                world.rank, world.size, world.where, "a signal or an abort", executor))
        return self

    def __exit__(self, *exc):
        if self.key is not None:
            abnormal_end.unregister(self.key)
        return False
