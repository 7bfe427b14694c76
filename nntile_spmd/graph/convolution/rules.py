"""Graph layer: registry entries of the convolutions and copy_intersection, and
conv2d_inplace's backward rule (the two backward convolutions).

Layout as in NNTile (column-major, WHCN): an image batch is [W, H, C, N], a kernel
[K_w, K_h, C_in, C_out]; conv2d_inplace is a cross-correlation like PyTorch's conv2d:
Y[i, j, o, b] = alpha * sum_{p, q, c} X[s0*i - p0 + d0*p, s1*j - p1 + d1*q, c, b]
* C[p, q, c, o] + beta * Y (X is zero outside its bounds: padding p0, p1).
Every dim may be tiled: the spatial dims of X and Y are separate axes, and a window
(OpSpec.windows) tells the plan which X tiles an output tile reads (its halo), so
neighbouring tiles move like any other remote tile. Channels are summed like gemm's K.
"""

from __future__ import annotations

from .. import ops
from ..checks import numel, require_float, require_same_dtype
from ..gradients import refuse_accumulating_output
from ..registry import REQUIRED, OpSpec, add_entries, always, labels, op_error
from .ops import conv_geometry, conv_output_shape

ENTRIES: list[OpSpec] = []   # the family's registry entries, in writing order
add_spec = ENTRIES.append   # each add_spec(OpSpec(...)) below joins ENTRIES


def conv2d_rule(op, ctx):
    """dX += alpha * conv^T(dY, C) and dC += alpha * corr(X, dY), both linear in dY."""
    x, c = op.inputs
    y = op.outputs[0]
    attrs = op.attrs
    refuse_accumulating_output(op, ctx)
    dy, alpha = ctx.grad(y), attrs["alpha"]
    shape = {key: attrs[key] for key in ("padding", "stride", "dilation")}
    if ctx.needs(x):
        ops.conv2d_bwd_input_inplace(alpha, dy, c, 1.0, ctx.grad(x), **shape)
    if ctx.needs(c):
        ops.conv2d_bwd_weight_inplace(alpha, x, dy, 1.0, ctx.grad(c), **shape)


CONV_ATTRS = {"alpha": 1.0, "beta": 0.0, "padding": (0, 0), "stride": (1, 1),
              "dilation": (1, 1)}

X_AXES, C_AXES, Y_AXES = ("xw", "xh", "ci", "b"), ("kw", "kh", "ci", "co"), \
    ("yw", "yh", "co", "b")


def input_window(attrs, kernel_shape, dim):
    """X rows read by Y rows [start, stop) along spatial dim `dim`."""
    pad, stride = attrs["padding"][dim], attrs["stride"][dim]
    reach = attrs["dilation"][dim] * (kernel_shape[dim] - 1) + 1
    return lambda start, stop: (stride * start - pad, stride * (stop - 1) - pad + reach)


def output_window(attrs, kernel_shape, dim):
    """Y rows that read X rows [start, stop) along spatial dim `dim`."""
    pad, stride = attrs["padding"][dim], attrs["stride"][dim]
    reach = attrs["dilation"][dim] * (kernel_shape[dim] - 1)
    return lambda start, stop: (-((reach - start - pad) // stride),
                                (stop - 1 + pad) // stride + 1)


def conv_tile_params(x_at, c_at, y_at):
    """Kernel params: the (w, h) offsets of the X, C and Y tiles of one step."""
    def params(attrs, offsets):
        return {"x_start": offsets[x_at][:2], "c_start": offsets[c_at][:2],
                "y_start": offsets[y_at][:2]}
    return params


def conv2d_infer(op, attrs, inputs):
    x, c = inputs
    return [(conv_output_shape(op, attrs, x, c), x.dtype)]


def conv2d_flops(attrs, in_shapes, out_shapes):
    x, c = in_shapes
    y = out_shapes[0]
    return 2 * y[0] * y[1] * numel(c) * y[3]


def given_output(op, attrs, inputs):
    """The output is given (its shape checked by the builder in ops.py)."""
    require_float(op, *inputs)
    require_same_dtype(op, *inputs)
    conv_geometry(op, attrs, inputs)
    if any(tensor.ndim != 4 for tensor in inputs):
        raise op_error(op, "operands must be 4-D ([W, H, C, N] images, [K_w, K_h, C_in, "
                       "C_out] kernels)", inputs)
    return [None]


def bwd_input_flops(attrs, in_shapes, out_shapes):
    dy, c = in_shapes
    return 2 * dy[0] * dy[1] * numel(c) * dy[3]


def bwd_weight_flops(attrs, in_shapes, out_shapes):
    x, dy = in_shapes
    return 2 * dy[0] * dy[1] * numel(out_shapes[0]) * dy[3]


def add_conv(name, infer, axes, windows, tile_params, flops, backward=None):
    """A convolution; those without a backward rule are the backward kernels themselves."""
    add_spec(OpSpec(name=name, kernel=name, num_inputs=2, num_outputs=1, infer=infer,
                    axes=lambda attrs, i, o: axes, attrs=CONV_ATTRS,
                    reads_output=lambda attrs: attrs["beta"] != 0, beta_attr="beta",
                    windows=windows, tile_params=tile_params, flops=flops,
                    backward=backward, differentiable=backward is not None))


# Y = alpha * conv(X, C) + beta * Y: X rows under a Y tile are its window
add_conv("conv2d_inplace", conv2d_infer, (X_AXES, C_AXES, Y_AXES),
              lambda attrs, i, o: {f"x{a}": (f"y{a}", input_window(attrs, i[1], d))
                                   for d, a in enumerate("wh")},
              conv_tile_params(0, 1, 2), conv2d_flops, backward=conv2d_rule)

# dX = alpha * conv^T(dY, C) + beta * dX: the dY rows that read a dX tile
add_conv("conv2d_bwd_input_inplace", given_output, (Y_AXES, C_AXES, X_AXES),
              lambda attrs, i, o: {f"y{a}": (f"x{a}", output_window(attrs, i[1], d))
                                   for d, a in enumerate("wh")},
              conv_tile_params(2, 1, 0), bwd_input_flops)

# dC = alpha * sum over X and dY + beta * dC: for each X tile, the dY rows that read it
add_conv("conv2d_bwd_weight_inplace", given_output, (X_AXES, Y_AXES, C_AXES),
              lambda attrs, i, o: {f"y{a}": (f"x{a}", output_window(attrs, o[0], d))
                                   for d, a in enumerate("wh")},
              conv_tile_params(0, 2, 1), bwd_weight_flops)


# -- copy_intersection ---------------------------------------------------------------
def copy_intersection_infer(op, attrs, inputs):
    (src,) = inputs
    for key in ("src_offset", "dst_offset"):
        offset = attrs[key]
        if not (isinstance(offset, tuple) and len(offset) == src.ndim and
                all(isinstance(v, int) for v in offset)):
            raise op_error(op, f"{key}={offset!r} must be a tuple of {src.ndim} ints",
                           inputs)
    return [None]


def copy_intersection_windows(attrs, in_shapes, out_shapes):
    """Source tiles meeting a destination tile [start, stop) (in destination coords)."""
    shift = [d - s for s, d in zip(attrs["src_offset"], attrs["dst_offset"])]
    return {f"s{i}": (f"d{i}", lambda start, stop, k=k: (start + k, stop + k))
            for i, k in enumerate(shift)}


def copy_intersection_params(attrs, offsets):
    """Where the step's source and destination tiles start, in the common coordinates."""
    return {"src_start": tuple(a + b for a, b in zip(attrs["src_offset"], offsets[0])),
            "dst_start": tuple(a + b for a, b in zip(attrs["dst_offset"], offsets[1]))}


add_spec(OpSpec(name="copy_intersection", kernel="copy_intersection", num_inputs=1,
                num_outputs=1, infer=copy_intersection_infer,
                axes=lambda attrs, i, o: (labels("s", len(i[0])), labels("d", len(o[0]))),
                attrs={"src_offset": REQUIRED, "dst_offset": REQUIRED}, reads_output=always,
                combine=None, windows=copy_intersection_windows,
                tile_params=copy_intersection_params, kernel_attrs=(),
                flops=lambda attrs, i, o: 0, differentiable=False))


def register(registry: dict) -> None:
    """Add the convolution entries to `registry` (graph/families.py calls it)."""
    add_entries(registry, ENTRIES)

