"""Runtime layer: where a rank's EVICTed tiles live, and the EVICT/PREFETCH handlers.

Host tiles (the CPU device) go to memory-mapped files in a temporary directory of
the rank (removed when the store goes, at exit, at an abort or a SIGTERM, and after a
SIGKILL by the next run: offload_files.py); GPU tiles go to host arrays.
Each tile keeps one slot for the store's life: an EVICT writes it (unless the
plan knows the copy is current), a PREFETCH reads it into a fresh device buffer
counted by the tile store. The copies run on the executor thread, synchronously:
the plan issues each PREFETCH a few EXECs before its use, so on the threaded
executor the copy overlaps with the tasks in flight on the workers.

Persistent tiles that the plan keeps offloaded between executes (plan/offload.py
resident_at_rest) are only here at rest: `TileStore.__getitem__` reads them from
their slot, so bind_data, get_output and checkpoints need no special case.
"""

from __future__ import annotations

import os
import weakref

import numpy as np

from ..plan.instructions import Evict, Prefetch
from .offload_files import make_directory, remove

ARENA_BYTES = 64 << 20      # one memory-mapped file holds many tiles' slots
ALIGN = 64                  # slot offsets, in bytes (cache lines)
ENV_DIRECTORY = "NNTILE_SPMD_OFFLOAD_DIR"   # where the files go (default: the temp dir)


class OffloadStore:
    """One rank's offloaded tile copies; `rest` are the persistent tiles the plan
    keeps resident between executes (every other persistent tile rests here)."""

    def __init__(self, xp, storage_dtype, rank, rest):
        self.on_host = xp is np           # else device arrays copy through .get/.set
        self.storage_dtype, self.rank, self.rest = storage_dtype, rank, rest
        self.copies = {}                  # key -> host array (its slot)
        self.arenas, self.used = [], 0    # memmaps; bytes used in the last one
        self.directory = None
        self.written = self.read = 0      # bytes copied out / in since reset_counts()
        self.slot_bytes = 0               # bytes of every slot handed out

    def reset_counts(self):
        self.written = self.read = 0

    def slot(self, key, meta):
        """The host array that holds `key`'s offloaded copy (made on first use)."""
        array = self.copies.get(key)
        if array is None:
            dtype = self.storage_dtype(meta.dtype)
            if self.on_host:
                array = self.arena_array(meta.shape, dtype, meta.nbytes)
            else:
                array = np.zeros(meta.shape, dtype, order="F")
            self.copies[key] = array
            self.slot_bytes += array.nbytes
        return array

    def arena_array(self, shape, dtype, nbytes):
        if not self.arenas or self.used + nbytes > self.arenas[-1].nbytes:
            if self.directory is None:
                self.directory = make_directory(self.rank, os.environ.get(ENV_DIRECTORY))
                weakref.finalize(self, remove, self.directory)
            path = os.path.join(self.directory, f"arena{len(self.arenas)}")
            self.arenas.append(np.memmap(path, np.uint8, "w+", shape=max(ARENA_BYTES,
                                                                         nbytes)))
            self.used = 0
        offset = self.used
        self.used += -(-max(nbytes, 1) // ALIGN) * ALIGN
        return np.ndarray(shape, dtype, buffer=self.arenas[-1], offset=offset, order="F")

    def write(self, key, tile, meta):
        host = self.slot(key, meta)
        if self.on_host:
            host[...] = tile
        else:
            tile.get(out=host)
        self.written += host.nbytes

    def read_into(self, key, buffer):
        host = self.copies[key]
        if self.on_host:
            buffer[...] = host
        else:
            buffer.set(host)
        self.read += host.nbytes

    def settle(self, store, permanent, meta):
        """After a failed execute: put every persistent tile back where it rests."""
        for key in permanent:
            if key in self.rest and key not in store.tiles:
                buffer = store.allocate(key, meta[key])
                self.read_into(key, buffer)
            elif key not in self.rest and key in store.tiles:
                self.write(key, store.tiles[key], meta[key])
                store.free(key, meta[key])


def offload_handlers(executor) -> dict:
    """EVICT and PREFETCH entries of an executor's dispatch table (operands: a slot)."""
    store = executor.store
    if store.offload is None:
        return {}
    offloaded, slots, metas = store.offload, executor.slots, executor.index.metas
    spares, take, give = executor.slot_spares, store.take, store.give
    offloaded.reset_counts()
    pending_sends, retire = executor.pending_sends, executor.retire_sends
    # the threaded executor: tasks still using a tile finish before it leaves
    writer, readers = getattr(executor, "writer", {}), getattr(executor, "readers", {})
    wait_users = getattr(executor, "wait_users", None)
    fence = executor.fence      # CUDA-aware MPI: a prefetched buffer is written on the stream

    def do_evict(instruction, slot, blocking):
        key, write_back = instruction.key, instruction.write_back
        if slot in writer or slot in readers:
            wait_users(slot)
        if write_back:
            offloaded.write(key, slots[slot], metas[slot])
        if pending_sends and slot in pending_sends and not retire(slot):
            return              # parked: released once its sends complete
        give(slots[slot], spares[slot])
        slots[slot] = None

    def do_prefetch(instruction, slot, blocking):
        buffer = take(metas[slot], spares[slot])
        offloaded.read_into(instruction.key, buffer)
        if fence is not None:
            fence.after_write(buffer)
        slots[slot] = buffer

    return {Evict: do_evict, Prefetch: do_prefetch}
