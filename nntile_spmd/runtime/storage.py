"""Runtime layer: one rank's tile storage with byte accounting.

Every array the executor holds goes through here, so `peak` is what the rank
really held; the plan's memory analysis must predict exactly this number.
"""

from __future__ import annotations


class TileStore:
    """key -> tile array, plus posted receive buffers, with current and peak bytes."""

    def __init__(self, array_module, storage_dtype):
        self.xp = array_module              # numpy or cupy
        self.storage_dtype = storage_dtype  # graph dtype name -> array dtype
        self.tiles = {}                     # never rebound: the executor binds to it
        self.nbytes = 0
        self.peak = 0
        self._dtypes = {}                   # graph dtype name -> array dtype (cache)
        self._empty, self._zeros = array_module.empty, array_module.zeros

    def new_buffer(self, meta, zero=False):
        """An uninitialized (or zeroed) Fortran-ordered tile, counted in the bytes held."""
        dtype = self._dtypes.get(meta.dtype)
        if dtype is None:
            dtype = self._dtypes[meta.dtype] = self.storage_dtype(meta.dtype)
        array = (self._zeros if zero else self._empty)(meta.shape, dtype, order="F")
        self.nbytes += meta.nbytes
        if self.nbytes > self.peak:
            self.peak = self.nbytes
        return array

    def allocate(self, key, meta, zero=False):
        """A new tile `key` (new_buffer inlined: the executor calls this per written tile)."""
        dtype = self._dtypes.get(meta.dtype)
        if dtype is None:
            dtype = self._dtypes[meta.dtype] = self.storage_dtype(meta.dtype)
        array = self.tiles[key] = (self._zeros if zero else self._empty)(meta.shape, dtype,
                                                                         order="F")
        self.nbytes += meta.nbytes
        if self.nbytes > self.peak:
            self.peak = self.nbytes
        return array

    def install(self, key, buffer, meta):
        """Make a received buffer the tile; an older copy is released."""
        if key in self.tiles:
            self.nbytes -= meta.nbytes
        self.tiles[key] = buffer

    def free(self, key, meta):
        del self.tiles[key]
        self.nbytes -= meta.nbytes

    def drop_transient(self, keep, meta):
        """Release every tile not in `keep` and forget posted receive buffers.

        FIX (runtime stage 3 tests): after an execute() that raised (a receive that
        timed out), the aborted run's received tiles and posted buffers stayed
        counted, so every later execute measured more than the planned peak.
        """
        for key in [key for key in self.tiles if key not in keep]:
            del self.tiles[key]
        self.nbytes = sum(meta[key].nbytes for key in self.tiles)

    def reset_peak(self):
        self.peak = self.nbytes

    def __contains__(self, key):
        return key in self.tiles

    def __getitem__(self, key):
        return self.tiles[key]
