"""cpu-backend specifics the reference comparison cannot see: guards and compile counts."""

import numpy as np
import pytest

from nntile_kernels import cpu, cpu_rules_broadcast, cpu_rules_reduce, cpu_rules_softmax


def tile(*shape, dtype=np.float32):
    """A Fortran-ordered tile of ones."""
    return np.ones(shape, dtype=dtype, order="F")


def test_one_numba_specialization_per_dtype_whatever_the_tile_shape():
    """Unit dims make tiles both C- and F-contiguous; the views numba gets stay one type."""
    shapes = [((1, 4, 1), 1), ((3, 4, 2), 1), ((3, 1, 2), 1), ((5,), 0), ((1, 1), 0)]
    for shape, axis in shapes:
        y = tile(shape[axis])
        cpu.KERNELS["sum_fiber"](tile(*shape), y, axis=axis)
        assert y[0] == np.prod(shape) / shape[axis]
        cpu.KERNELS["softmax"](tile(*shape), tile(*shape), axis=axis)
    float32 = [s for s in cpu_rules_reduce._sum_fiber.signatures if str(s[0].dtype) == "float32"]
    assert len(float32) == 1, cpu_rules_reduce._sum_fiber.signatures
    float32 = [s for s in cpu_rules_softmax._softmax.signatures if str(s[0].dtype) == "float32"]
    assert len(float32) == 1, cpu_rules_softmax._softmax.signatures


def test_slice_kernels_compile_once_per_dtype():
    """The slice kernels see (m, n, k) / (m, k) C-ordered views whatever the tile shape."""
    shapes = [((1, 4, 1), 1), ((3, 4, 2), 1), ((3, 1, 2), 0), ((5,), 0), ((1, 1), 1)]
    for shape, axis in shapes:
        part = tuple(d for i, d in enumerate(shape) if i != axis)
        z = tile(*part)
        cpu.KERNELS["sumprod_slice"](tile(*shape), tile(*shape), z, axis=axis)
        assert (z == shape[axis]).all()
        cpu.KERNELS["softmax_from_logsumexp"](tile(*part), tile(*shape), tile(*shape), axis=axis)
    for kernel in (cpu_rules_reduce._sumprod_slice, cpu_rules_broadcast._softmax_from_logsumexp):
        float32 = [s for s in kernel.signatures if str(s[0].dtype) == "float32"]
        assert len(float32) == 1, kernel.signatures


def test_layer_norm_kernels_compile_once_per_dtype():
    """The slice and fiber kernels of LayerNorm, their m == 1 branches included (axis 0),
    see the same C-ordered view types whatever the tile shape."""
    shapes = [((1, 4, 1), 1), ((3, 4, 2), 1), ((3, 1, 2), 0), ((9, 2), 0), ((5,), 0), ((1, 1), 1)]
    for shape, axis in shapes:
        part = tuple(d for i, d in enumerate(shape) if i != axis)
        s = tile(*part)
        cpu.KERNELS["sum_slice"](tile(*shape), s, axis=axis)
        assert (s == shape[axis]).all()
        cpu.KERNELS["add_slice"](tile(*part), tile(*shape), tile(*shape), axis=axis)
        cpu.KERNELS["multiply_slice"](tile(*part), tile(*shape), tile(*shape), axis=axis)
        f = tile(shape[axis])
        cpu.KERNELS["sumprod_fiber"](tile(*shape), tile(*shape), f, axis=axis)
        assert (f == np.prod(shape) / shape[axis]).all()
        cpu.KERNELS["multiply_fiber"](f, tile(*shape), tile(*shape), axis=axis)
        cpu.KERNELS["sumprod_fiber_backward"](f, tile(*shape), tile(*shape), axis=axis)
    kernels = (cpu_rules_reduce._sum_slice, cpu_rules_broadcast._add_slice,
               cpu_rules_broadcast._multiply_slice, cpu_rules_reduce._sumprod_fiber,
               cpu_rules_broadcast._multiply_fiber, cpu_rules_broadcast._sumprod_fiber_backward)
    for kernel in kernels:
        float32 = [s for s in kernel.signatures if str(s[0].dtype) == "float32"]
        assert len(float32) == 1, kernel.signatures


@pytest.mark.parametrize("label", [-1, 5])
def test_cross_entropy_rejects_labels_outside_the_class_axis(label):
    """numba does no bounds checks, so the kernel checks labels itself."""
    labels = np.array([0, label, 2])
    with pytest.raises(IndexError, match="label"):
        cpu.KERNELS["cross_entropy"](tile(5, 3), labels, tile())
    with pytest.raises(IndexError, match="label"):
        cpu.KERNELS["cross_entropy_backward"](tile(5, 3), labels, tile(), tile(5, 3))


def test_gemm_refuses_an_output_it_could_not_write_in_place():
    """A C-ordered output would be folded into a copy and the result lost: an error instead."""
    c = np.zeros((4, 3), np.float32)  # C order
    with pytest.raises(ValueError, match="F-contiguous"):
        cpu.KERNELS["gemm"](tile(4, 2), tile(2, 3), c)


def test_gemm_with_unaligned_output_still_writes_it():
    """If f2py must copy C (misaligned buffer), the result is written back into the tile."""
    raw = np.zeros(4 * 3 * 4 + 1, np.uint8)
    c = raw[1:].view(np.float32).reshape((4, 3), order="F")  # F-contiguous, misaligned
    assert c.flags.f_contiguous and not c.flags.aligned
    cpu.KERNELS["gemm"](tile(4, 2), tile(2, 3), c, alpha=0.5)
    np.testing.assert_array_equal(c, np.ones((4, 3)))
