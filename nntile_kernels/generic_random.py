"""randn written once against an array module `xp` (NumPy reference, CuPy, and the cpu
table, where NumPy's vectorised integer ops already are the loop numba would compile).

Counter-based: element i of the underlying tensor (its F-order linear index) gets
normal number i of the stream keyed by `seed`, so every tiling and rank count writes
the same values. Two uniforms per element come from SplitMix64's finalizer applied to
the counters 2i and 2i + 1 plus a key hashed from the seed (a keyed hash of a counter,
as Philox is), turned into a normal by Box-Muller. Arrays only: never imports
nntile_spmd, mpi4py, numba or cupy.
"""

import math

GOLDEN = 0x9E3779B97F4A7C15
MASK64 = (1 << 64) - 1


def _mix(xp, z):
    """SplitMix64's finalizer on uint64 arrays (products wrap modulo 2^64)."""
    z = (z ^ (z >> xp.uint64(30))) * xp.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> xp.uint64(27))) * xp.uint64(0x94D049BB133111EB)
    return z ^ (z >> xp.uint64(31))


def _key(seed):
    """The stream key of `seed`: its SplitMix64 hash, in Python ints."""
    z = (seed * GOLDEN + GOLDEN) & MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def _global_index(xp, tile_shape, offset, shape):
    """uint64 F-order linear index in `shape` of each element of a tile at `offset`."""
    index, stride = xp.zeros(tile_shape, dtype=xp.uint64), 1
    for dim, size in enumerate(tile_shape):
        coords = xp.arange(offset[dim], offset[dim] + size, dtype=xp.uint64)
        index = index + coords.reshape((size,) + (1,) * (len(tile_shape) - dim - 1)) \
            * xp.uint64(stride)
        stride *= shape[dim]
    return index


def _uniform(xp, counter, key):
    """A float64 in (0, 1] from the top 53 bits of the keyed hash of `counter`."""
    bits = _mix(xp, counter + xp.uint64(key))
    return ((bits >> xp.uint64(11)) + xp.uint64(1)).astype(xp.float64) * 2.0 ** -53


def randn(xp, y, *, seed, mean=0.0, stddev=1.0, offset=None, shape=None):
    """y = mean + stddev * N(0, 1), the numbers of the tile at `offset` in a tensor of
    `shape` (defaults: y itself is the whole tensor)."""
    offset = (0,) * y.ndim if offset is None else offset
    shape = y.shape if shape is None else shape
    # flat, so a 0-d tile is a 1-element array: NumPy warns on overflowing scalars only
    counter = _global_index(xp, y.shape, offset, shape).reshape(-1) * xp.uint64(2)
    key = _key(seed)
    radius = xp.sqrt(-2.0 * xp.log(_uniform(xp, counter, key)))
    angle = (2.0 * math.pi) * _uniform(xp, counter + xp.uint64(1), key)
    y[...] = (mean + stddev * radius * xp.cos(angle)).reshape(y.shape)


def uniform(xp, y, *, seed, low=0.0, high=1.0, offset=None, shape=None):
    """y = low + (high - low) * U(0, 1], the numbers of the tile at `offset` in a tensor
    of `shape`: element i gets the keyed hash of counter i of the stream of `seed`, so
    every tiling and rank count writes the same values (parameter initialisation)."""
    offset = (0,) * y.ndim if offset is None else offset
    shape = y.shape if shape is None else shape
    counter = _global_index(xp, y.shape, offset, shape).reshape(-1)
    y[...] = (low + (high - low) * _uniform(xp, counter, _key(seed))).reshape(y.shape)


def dropout_key(seed, step):
    """The stream of dropout site `seed` at training step `step` (both ints >= 0)."""
    return _key((_key(seed) + step * GOLDEN) & MASK64)


def dropout(xp, x, y, *, p, seed, step=0.0, offset=None, shape=None):
    """y = x / (1 - p) where the keyed uniform of the element's index in the whole tensor
    (of `shape`, this tile at `offset`) exceeds p, else 0: the same mask on every tiling
    and rank count. p == 0 copies x (dropout switched off: bitwise the identity)."""
    if not 0.0 <= p < 1.0:
        raise ValueError(f"dropout: p={p} must be in [0, 1)")
    if p == 0.0:
        y[...] = x
        return
    offset = (0,) * x.ndim if offset is None else offset
    shape = x.shape if shape is None else shape
    counter = _global_index(xp, x.shape, offset, shape).reshape(-1)
    keep = (_uniform(xp, counter, dropout_key(int(seed), int(step))) > p).reshape(x.shape)
    y[...] = xp.where(keep, x * (1.0 / (1.0 - p)), 0.0)
