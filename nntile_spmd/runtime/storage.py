"""Runtime layer: one rank's tile storage, a tracking allocator over its buffers.

Every array the executor holds (tiles, posted receive buffers, spare buffers) is
allocated and released here, and the bytes are counted from the arrays
themselves (`array.nbytes`), never from the plan's tile sizes: `peak` is what
the rank really held, so comparing it with the plan's memory analysis is a check
that can fail (a tile of the wrong size shows up here).

Spare buffers: a tile freed during an execute is kept and handed to the next allocation
of the same shape and dtype, instead of going back to the allocator: a fresh multi-MiB
buffer costs page faults and zero-filling on first touch, inside MPI's copy of a
received tile, and a small one NumPy's array construction per task (docs/benchmarks.md,
"Measurements behind code constants"). Spares are held memory and are counted in `held`
and `peak`. The rule that keeps the peak where the plan puts it: in program order
(below), live + spare bytes never exceed max(in-order peak so far, `ceiling`, live
bytes), where the ceiling is the in-order peak of the previous execute of the same
program (spares are dropped, as few as needed, when an allocation or a late release
would break the rule, and all of them when another program runs).

Frees that take effect late: a tile whose FREE is reached while a task still reads
it (the threaded executor: `defer`, then `release_deferred`), or while a send of it
is still in flight (the executor parks it: `park`, then `unpark`), leaves the tile
table but stays counted until then. `peak` stays the most really held;
`in_order_peak` is the most held minus deferred and parked bytes, that is, what the
rank would have held had every FREE taken effect at its place in the program (the
plan's memory model, which it equals); `parked_peak` bounds the difference. Spares
are off while frees are deferred (`use_spares`): a spare counted at the FREE and a
buffer still in use cannot both be accounted in program order.
"""

from __future__ import annotations

from typing import NamedTuple


class SlotSpares(NamedTuple):
    """A ProgramIndex's slot -> spare list, and the store whose lists they are."""
    store: object
    lists: list


class TileStore:
    """key -> tile array, plus posted receive buffers and spares, with measured bytes."""

    def __init__(self, array_module, storage_dtype):
        self.xp = array_module              # numpy or cupy
        self.storage_dtype = storage_dtype  # graph dtype name -> array dtype
        self.tiles = {}                     # never rebound: the executor binds to it
        self.nbytes = 0                     # live: tiles and posted receive buffers
        self.peak = 0                       # most of live + spare bytes since begin()
        self.deferred = 0                   # live bytes of tiles freed in program order
        self.in_order_peak = 0              # most of live - deferred + spare bytes
        self.use_spares = True
        self.spare = {}                     # (shape, dtype name) -> [freed arrays] (lists
        #                                     are kept when emptied: executors bind them)
        self.spare_bytes = 0
        # Buffers parked by the executor (a FREEd or replaced tile version whose sends
        # are still in flight): live bytes the plan has already freed. The most parked
        # at once, over the store's life, bounds how far the peak exceeds the planned
        # one (spares only refill up to an earlier peak).
        self.parked_bytes = 0
        self.parked_peak = 0
        self.ceiling = 0                    # peak of the last execute of spare_owner
        self.spare_owner = None             # the program whose executes keep spares
        self.last_program = None            # the program the last finished execute ran
        self._dtypes = {}                   # graph dtype name -> array dtype (cache)
        self.offload = None                 # OffloadStore when the plan offloads tiles
        self._empty, self._zeros = array_module.empty, array_module.zeros

    def new_buffer(self, meta, zero=False):
        """An uninitialized (or zeroed) Fortran-ordered tile, counted in the bytes held."""
        if self.spare_bytes:
            arrays = None if zero else self.spare.get((meta.shape, meta.dtype))
            if arrays:
                return self.take(meta, arrays)
            # in program order: live bytes whose FREE the plan has passed do not count
            live = self.nbytes - self.deferred - self.parked_bytes + meta.nbytes
            limit = max(self.in_order_peak, self.ceiling, live)
            if live + self.spare_bytes > limit:
                self.trim_spare(limit - live)   # within the (planned) peak
        dtype = self._dtypes.get(meta.dtype)
        if dtype is None:
            dtype = self._dtypes[meta.dtype] = self.storage_dtype(meta.dtype)
        array = (self._zeros if zero else self._empty)(meta.shape, dtype, order="F")
        self.nbytes = nbytes = self.nbytes + array.nbytes
        held = nbytes + self.spare_bytes
        if held > self.peak:
            self.peak = held
        in_order = held - self.deferred - self.parked_bytes
        if in_order > self.in_order_peak:
            self.in_order_peak = in_order
        return array

    def take(self, meta, spares):
        """A buffer for a tile of `meta`, from `spares` (its spare list) when it has one."""
        if spares:
            array = spares.pop()            # spare -> live: the bytes held do not change
            nbytes = array.nbytes
            self.spare_bytes -= nbytes
            self.nbytes += nbytes
            return array
        return self.new_buffer(meta)

    def give(self, array, spares):
        """release() with the buffer's spare list already known (the executor's slots)."""
        nbytes = array.nbytes
        self.nbytes -= nbytes
        if self.use_spares:
            spares.append(array)
            self.spare_bytes += nbytes

    def park(self, array):
        """A tile version leaves the tile table while its sends are in flight: still held."""
        self.parked_bytes += array.nbytes
        if self.parked_bytes > self.parked_peak:
            self.parked_peak = self.parked_bytes

    def unpark(self, array, spares):
        """A parked buffer's sends completed: release it as give() does, keeping the
        spares within the in-order peak (the plan freed this buffer long ago)."""
        self.parked_bytes -= array.nbytes
        self.give(array, spares)
        live = self.nbytes - self.deferred - self.parked_bytes
        limit = max(self.in_order_peak, self.ceiling)
        if live + self.spare_bytes > limit:
            self.trim_spare(max(0, limit - live))

    def spare_lists(self, specs) -> list:
        """The spare list of each (shape, dtype name) in `specs` (kept for the store's life)."""
        spare = self.spare
        return [spare.setdefault(spec, []) for spec in specs]

    def slot_spares(self, index) -> list:
        """slot -> spare list of its (shape, dtype) for a ProgramIndex (program_index.py);
        derived once per index: an index belongs to one rank, hence to one store."""
        cached = index.scratch.get("slot_spares")
        if cached is None or cached.store is not self:
            kind_spares = self.spare_lists(index.kind_specs)
            cached = index.scratch["slot_spares"] = SlotSpares(
                self, [kind_spares[kind] for kind in index.kinds])
        return cached.lists

    def trim_spare(self, keep_bytes):
        """Give spare buffers back to the allocator until at most `keep_bytes` remain."""
        for arrays in self.spare.values():
            while arrays and self.spare_bytes > keep_bytes:
                self.spare_bytes -= arrays.pop().nbytes
            if self.spare_bytes <= keep_bytes:
                return

    def allocate(self, key, meta, zero=False):
        array = self.tiles[key] = self.new_buffer(meta, zero)
        return array

    def install(self, key, buffer, meta):
        """Make a received buffer the tile; an older copy is released."""
        old = self.tiles.get(key)
        self.tiles[key] = buffer
        if old is not None:
            self.release(old, meta)

    def free(self, key, meta):
        self.release(self.tiles.pop(key), meta)

    def defer(self, array):
        """FREE of a tile still in use: it left the executor's slots, its bytes stay held."""
        self.deferred += array.nbytes
        return array

    def release_deferred(self, array, spares):
        self.deferred -= array.nbytes
        self.give(array, spares)

    def release(self, array, meta):
        """A buffer leaves the live set and becomes a spare (held bytes unchanged)."""
        nbytes = array.nbytes
        self.nbytes -= nbytes
        if self.use_spares:
            key = (meta.shape, meta.dtype)
            arrays = self.spare.get(key)
            if arrays is None:
                self.spare[key] = [array]
            else:
                arrays.append(array)
            self.spare_bytes += nbytes

    def drop_spare(self):
        """Give every spare buffer back to the allocator."""
        for arrays in self.spare.values():
            arrays.clear()
        self.spare_bytes = 0
        self.ceiling, self.spare_owner = 0, None

    def begin(self, program):
        """An execute of `program` starts: keep the spares only if it ran last, and
        measure the peak from here (after dropping another program's spares)."""
        if program is not self.spare_owner or not self.use_spares:
            self.drop_spare()
        self.peak = self.in_order_peak = self.nbytes + self.spare_bytes

    def end(self, program):
        """An execute of `program` finished: its spares may serve the next one."""
        self.ceiling, self.spare_owner = max(self.ceiling, self.in_order_peak), program
        self.last_program = program

    def drop_transient(self, permanent, meta):
        """After a failed execute: keep only the `permanent` tiles, recount the bytes
        (posted receive buffers and half-done intermediates are forgotten)."""
        if self.offload is not None:
            self.offload.settle(self, permanent, meta)
        for key in [key for key in self.tiles if key not in permanent]:
            del self.tiles[key]
        self.nbytes = sum(array.nbytes for array in self.tiles.values())
        self.drop_spare()
        self.peak = self.in_order_peak = self.nbytes
        self.deferred = self.parked_bytes = 0

    def __contains__(self, key):
        return key in self.tiles or (self.offload is not None and key in self.offload.copies)

    def __getitem__(self, key):
        """The tile; one that rests offloaded (offload_store.py) is read in its slot."""
        tile = self.tiles.get(key)
        if tile is None and self.offload is not None:
            return self.offload.copies[key]
        return self.tiles[key]
