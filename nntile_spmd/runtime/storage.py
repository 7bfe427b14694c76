"""Runtime layer: one rank's tile storage with byte accounting.

Every array the executor holds goes through here, so `peak` is what the rank
really held; the plan's memory analysis must predict exactly this number.

Spare buffers: a large tile freed during an execute is kept (uncounted) and
handed to the next allocation of the same shape and dtype, instead of going back
to the C allocator: a fresh multi-MiB buffer costs page faults and zero-filling
on first touch, inside MPI's copy of a received tile (bench_exchange: half the
exchange rate for 4-64 MiB tiles). The rule that keeps the accounting honest:
live bytes + spare bytes never exceed max(peak so far, `ceiling`), where the
ceiling is the peak of the previous execute of the same program (spares are
dropped whenever an allocation would break the rule, and when another program
runs). `nbytes` and `peak` are counted exactly as without spares, and the memory
the store really holds never exceeds the peak the plan predicts for the program
it runs.
"""

from __future__ import annotations

SPARE_MIN_BYTES = 1 << 17   # smaller tiles are cheap to get from malloc's free lists


class TileStore:
    """key -> tile array, plus posted receive buffers, with current and peak bytes."""

    def __init__(self, array_module, storage_dtype):
        self.xp = array_module              # numpy or cupy
        self.storage_dtype = storage_dtype  # graph dtype name -> array dtype
        self.tiles = {}                     # never rebound: the executor binds to it
        self.nbytes = 0
        self.peak = 0
        self.spare = {}                     # (shape, dtype name) -> [freed arrays]
        self.spare_bytes = 0
        self.ceiling = 0                    # peak of the last execute of spare_owner
        self.spare_owner = None             # the program whose executes keep spares
        self._dtypes = {}                   # graph dtype name -> array dtype (cache)
        self._empty, self._zeros = array_module.empty, array_module.zeros

    def new_buffer(self, meta, zero=False):
        """An uninitialized (or zeroed) Fortran-ordered tile, counted in the bytes held."""
        size = meta.nbytes
        if self.spare_bytes:
            arrays = None if zero else self.spare.get((meta.shape, meta.dtype))
            if arrays:
                self.spare_bytes -= size
                array = arrays.pop()
                self.nbytes += size
                if self.nbytes > self.peak:
                    self.peak = self.nbytes
                return array
            if self.nbytes + self.spare_bytes + size > max(self.peak, self.ceiling,
                                                           self.nbytes + size):
                self.drop_spare()           # never hold more than the (planned) peak
        dtype = self._dtypes.get(meta.dtype)
        if dtype is None:
            dtype = self._dtypes[meta.dtype] = self.storage_dtype(meta.dtype)
        array = (self._zeros if zero else self._empty)(meta.shape, dtype, order="F")
        self.nbytes += size
        if self.nbytes > self.peak:
            self.peak = self.nbytes
        return array

    def allocate(self, key, meta, zero=False):
        array = self.tiles[key] = self.new_buffer(meta, zero)
        return array

    def install(self, key, buffer, meta):
        """Make a received buffer the tile; an older copy is released."""
        old = self.tiles.get(key)
        self.tiles[key] = buffer
        if old is not None:
            self.nbytes -= meta.nbytes
            if meta.nbytes >= SPARE_MIN_BYTES:
                self._keep(old, meta)

    def free(self, key, meta):
        array = self.tiles.pop(key)
        self.nbytes -= meta.nbytes
        if meta.nbytes >= SPARE_MIN_BYTES:
            self._keep(array, meta)

    def _keep(self, array, meta):
        """Keep a released tile for reuse (live + spare bytes stay what they were)."""
        arrays = self.spare.get((meta.shape, meta.dtype))
        if arrays is None:
            self.spare[(meta.shape, meta.dtype)] = [array]
        else:
            arrays.append(array)
        self.spare_bytes += meta.nbytes

    def drop_spare(self):
        """Give every spare buffer back to the allocator."""
        self.spare.clear()
        self.spare_bytes = 0
        self.ceiling, self.spare_owner = 0, None

    def begin(self, program):
        """An execute of `program` starts: keep the spares only if it ran last."""
        if program is not self.spare_owner:
            self.drop_spare()

    def end(self, program):
        """An execute of `program` finished: its spares may serve the next one."""
        self.ceiling, self.spare_owner = max(self.ceiling, self.peak), program

    def reset_peak(self):
        self.peak = self.nbytes

    def drop_transient(self, permanent, meta):
        """After a failed execute: keep only the `permanent` tiles, recount the bytes
        (posted receive buffers and half-done intermediates are forgotten)."""
        for key in [key for key in self.tiles if key not in permanent]:
            del self.tiles[key]
        self.nbytes = sum(meta[key].nbytes for key in self.tiles)
        self.drop_spare()
        self.peak = self.nbytes

    def __contains__(self, key):
        return key in self.tiles

    def __getitem__(self, key):
        return self.tiles[key]
