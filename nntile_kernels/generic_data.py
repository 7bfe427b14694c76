"""Data-movement kernels written once against an array module `xp`: box copies between
tiles of different tilings (slice, gather, scatter, concat's parts) and reshape.

Both place x into y: `x_offset` and `y_offset` are the tiles' first elements in one
coordinate frame, and y = beta*y + (x where it overlaps y). Steps of one output tile
write disjoint parts, so accumulating with beta = 1 after a first beta = 0 step is a
copy, and partial results computed on different ranks merge by `add`.
"""


def _scaled(y, beta):
    """y = beta*y, never reading y when beta == 0."""
    if beta == 0:
        y.fill(0)
    elif beta != 1:
        y *= beta


def add_box(xp, x, y, *, x_offset, y_offset, beta=0.0):
    """y = beta*y + x on the overlap of the boxes at x_offset and y_offset."""
    _scaled(y, beta)
    low = [max(a, b) for a, b in zip(x_offset, y_offset)]
    high = [min(a + n, b + m) for a, n, b, m in zip(x_offset, x.shape, y_offset, y.shape)]
    if any(h <= lo for lo, h in zip(low, high)):
        return
    x_part = tuple(slice(lo - a, h - a) for lo, h, a in zip(low, high, x_offset))
    y_part = tuple(slice(lo - b, h - b) for lo, h, b in zip(low, high, y_offset))
    y[y_part] += x[x_part]


def _flat_indices(xp, shape, offset, whole):
    """Column-major flat index in a tensor shaped `whole` of every element of a box."""
    flat = xp.zeros(shape, dtype=xp.int64)
    stride = 1
    for dim, (size, start, total) in enumerate(zip(shape, offset, whole)):
        index = xp.arange(start, start + size, dtype=xp.int64)
        flat = flat + index.reshape((1,) * dim + (size,) + (1,) * (len(shape) - dim - 1)) * stride
        stride *= total
    return flat


def reshape_box(xp, x, y, *, x_offset, y_offset, x_shape, y_shape, beta=0.0):
    """y = beta*y + the elements of x's tile that y's tile holds after reshaping a tensor
    shaped x_shape into y_shape (the same column-major order of elements)."""
    _scaled(y, beta)
    flat = _flat_indices(xp, y.shape, y_offset, y_shape)
    inside = xp.ones(y.shape, dtype=bool)
    local = xp.zeros(y.shape, dtype=xp.int64)
    stride, local_stride = 1, 1
    for total, start, size in zip(x_shape, x_offset, x.shape):
        coord = (flat // stride) % total - start
        inside &= (coord >= 0) & (coord < size)
        local = local + coord * local_stride
        stride *= total
        local_stride *= size
    x_flat = x.reshape(-1, order="F")
    y[inside] += x_flat[local[inside]]


def reshaped_call(table, *arrays, view_kernel, view_shapes, **params):
    """table[view_kernel](*arrays, **params) with arrays[i] reshaped to `shape` for each
    (i, shape) of view_shapes: tiles that the plan aliases as views of other tiles
    (column-major reshapes of an F-contiguous tile are views, so outputs land in it)."""
    arrays = list(arrays)
    for position, shape in view_shapes:
        tile = arrays[position]
        assert tile.flags.f_contiguous, "a viewed tile must be F-contiguous"
        arrays[position] = tile.reshape(shape, order="F")
    table[view_kernel](*arrays, **params)
