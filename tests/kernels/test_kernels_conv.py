"""The convolution reference kernels against their definition written as loops, steps
over tiles summing to the whole, and the backward kernels as the forward's adjoints;
the cpu and cuda backends are checked against the reference in test_kernels_table.py."""

import itertools

import numpy as np
import pytest

from nntile_kernels import reference

RNG = np.random.default_rng(5)
WHOLE = {"x_start": (0, 0), "c_start": (0, 0), "y_start": (0, 0)}


def out_size(size, kernel, padding, stride, dilation):
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


def conv_by_loops(x, c, padding, stride, dilation):
    """Y[i, j, o, b] = sum X[s0*i - p0 + d0*p, s1*j - p1 + d1*q, k, b] * C[p, q, k, o]."""
    shape = [out_size(x.shape[a], c.shape[a], padding[a], stride[a], dilation[a])
             for a in range(2)] + [c.shape[3], x.shape[3]]
    y = np.zeros(shape)
    for i, j, p, q in itertools.product(range(shape[0]), range(shape[1]), range(c.shape[0]),
                                        range(c.shape[1])):
        u = stride[0] * i - padding[0] + dilation[0] * p
        v = stride[1] * j - padding[1] + dilation[1] * q
        if 0 <= u < x.shape[0] and 0 <= v < x.shape[1]:
            y[i, j] += np.einsum("kb,ko->ob", x[u, v], c[p, q])
    return y


GEOMETRIES = [((0, 0), (1, 1), (1, 1)), ((1, 1), (1, 1), (1, 1)), ((2, 1), (2, 3), (1, 1)),
              ((1, 0), (1, 2), (2, 1)), ((3, 3), (2, 2), (1, 1))]


def random(*shape):
    return np.asfortranarray(RNG.standard_normal(shape))


@pytest.mark.parametrize("padding, stride, dilation", GEOMETRIES)
def test_conv2d_matches_its_definition(padding, stride, dilation):
    x, c = random(7, 6, 3, 2), random(3, 2, 3, 4)
    expected = conv_by_loops(x, c, padding, stride, dilation)
    y = np.asfortranarray(np.full(expected.shape, np.nan))
    reference.conv2d_inplace(x, c, y, padding=padding, stride=stride, dilation=dilation,
                             **WHOLE)
    np.testing.assert_allclose(y, expected, rtol=1e-12, atol=1e-12)


def tile_steps(sizes, cuts):
    """(start, stop) of each tile of an axis cut at `cuts`."""
    bounds = [0, *cuts, sizes]
    return list(zip(bounds, bounds[1:]))


@pytest.mark.parametrize("backend", ["reference", "cpu"])
@pytest.mark.parametrize("padding, stride, dilation", GEOMETRIES)
def test_steps_over_tiles_sum_to_the_whole(backend, padding, stride, dilation):
    """Every (x tile, c tile) step into every y tile, summed: the whole convolution."""
    from nntile_kernels import get_kernels

    kernels = get_kernels(backend)
    x, c = random(7, 6, 3, 2), random(3, 2, 3, 4)
    expected = conv_by_loops(x, c, padding, stride, dilation)
    got = np.zeros(expected.shape)
    for (x0, x1), (xh0, xh1), (c0, c1), (y0, y1), (yh0, yh1) in itertools.product(
            tile_steps(7, [3]), tile_steps(6, [1, 4]), tile_steps(3, [2]),
            tile_steps(expected.shape[0], [1]), tile_steps(expected.shape[1], [2])):
        part = np.asfortranarray(np.full((y1 - y0, yh1 - yh0) + expected.shape[2:], np.nan))
        kernels["conv2d_inplace"](
            np.asfortranarray(x[x0:x1, xh0:xh1]), np.asfortranarray(c[c0:c1]), part,
            padding=padding, stride=stride, dilation=dilation, x_start=(x0, xh0),
            c_start=(c0, 0), y_start=(y0, yh0))
        got[y0:y1, yh0:yh1] += part
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("padding, stride, dilation", GEOMETRIES)
def test_backward_kernels_are_the_adjoints(padding, stride, dilation):
    """<conv(x, c), dy> = <x, bwd_input(dy, c)> = <c, bwd_weight(x, dy)>."""
    x, c = random(7, 6, 3, 2), random(3, 2, 3, 4)
    y = conv_by_loops(x, c, padding, stride, dilation)
    dy = random(*y.shape)
    dx = np.asfortranarray(np.full(x.shape, np.nan))
    dc = np.asfortranarray(np.full(c.shape, np.nan))
    geometry = {"padding": padding, "stride": stride, "dilation": dilation, **WHOLE}
    reference.conv2d_bwd_input_inplace(dy, c, dx, **geometry)
    reference.conv2d_bwd_weight_inplace(x, dy, dc, **geometry)
    product = np.vdot(y, dy)
    np.testing.assert_allclose(np.vdot(x, dx), product, rtol=1e-11)
    np.testing.assert_allclose(np.vdot(c, dc), product, rtol=1e-11)


def test_copy_intersection_copies_only_the_overlap():
    src, dst = random(4, 3), random(5, 2)
    before = dst.copy()
    reference.copy_intersection(src, dst, src_start=(1, 0), dst_start=(0, 1))
    # global rows 1..4 of src meet dst rows 0..4 at 1..4; columns: src 0..2, dst 1..2
    expected = before.copy()
    expected[1:5, 0:2] = src[0:4, 1:3]
    np.testing.assert_array_equal(dst, expected)
