"""16-bit tiles on the CPU (compute in fp32, round on store) and the fp32_fast_* gemm modes.

Every case of the kernel table runs on bf16 and fp16 tiles through the widened cpu
table, against the fp32 NumPy reference on the same (16-bit) values with its outputs
rounded to the tile dtype. The fast gemm modes equal a float64 product of inputs
rounded independently of the kernels' rounding code.
"""

import ml_dtypes
import numpy as np
import pytest

import nntile_kernels
from nntile_kernels import cpu, reference
from nntile_kernels.rounding import round_operand
from nntile_kernels.widen import DATA_MOVEMENT, TABLE_BOUND, widen_table
from nntile_spmd.runtime.device import kernel_output_counts

from kernel_cases import CASES, distinct, make_arrays

BF16, F16, F32 = np.dtype(ml_dtypes.bfloat16), np.dtype(np.float16), np.dtype(np.float32)
# two units in the last place of each 16-bit type: the fp32 kernels differ from the
# reference in the last fp32 bits, which may flip one rounding of the stored result
TOLERANCE = {BF16: 2.0 ** -7, F16: 2.0 ** -10}
COUNTS = kernel_output_counts()
WIDE_CPU = widen_table(cpu.KERNELS, COUNTS)


def as_fp32(arrays):
    """fp32 copies of the 16-bit arrays (aliases stay aliases), others as they are."""
    copies = {id(a): a.astype(F32, order="F") for a in arrays if a.dtype in (BF16, F16)}
    return [copies.get(id(a), a) for a in arrays]


def as_bytes(array):
    return array.reshape(-1).view(np.uint8)


def test_every_computing_kernel_knows_its_outputs():
    """Output counts come from the op registry: a kernel missing there would write its
    inputs back too."""
    missing = set(nntile_kernels.KERNEL_NAMES) - set(COUNTS) - DATA_MOVEMENT - TABLE_BOUND
    assert not missing
    assert all(COUNTS[name] for name in nntile_kernels.KERNEL_NAMES if name in COUNTS)


@pytest.mark.parametrize("dtype", [BF16, F16], ids=["bf16", "fp16"])
@pytest.mark.parametrize(("name", "args", "params"), CASES)
def test_widened_cpu_kernel_is_fp32_reference_rounded(name, args, params, dtype):
    arrays = make_arrays(args, dtype)
    before = [a.copy() for a in arrays]
    expected = as_fp32(make_arrays(args, dtype))
    reference.KERNELS[name](*expected, **params)
    assert WIDE_CPU[name](*arrays, **params) is None
    outputs = len(arrays) - (COUNTS.get(name) or len(arrays))
    for position in distinct(arrays):
        got = arrays[position]
        assert got.dtype == before[position].dtype, f"{name}: argument {position}"
        if position < outputs and not any(a is got for a in arrays[outputs:]):
            np.testing.assert_array_equal(as_bytes(got), as_bytes(before[position]),
                                          err_msg=f"{name}: input {position} was rewritten")
            continue
        want = expected[position].astype(got.dtype)    # the reference, rounded on store
        unread = args[position].kind == "unread"
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                                   rtol=TOLERANCE.get(got.dtype, 0), atol=TOLERANCE.get(
                                       got.dtype, 0), equal_nan=unread,
                                   err_msg=f"{name}: argument {position}")


def test_widening_rounds_to_nearest_even():
    """A bf16 add computed in fp32 stores the correctly rounded sum (not a truncation)."""
    x = np.array([1.0, 1.0, 256.0], dtype=BF16)
    y = np.array([2.0 ** -8 * 1.5, 2.0 ** -9, 1.0], dtype=BF16)   # 1 + 1.5 ulp/2, a tie
    z = np.empty(3, dtype=BF16)
    WIDE_CPU["add"](x, y, z, alpha=1.0, beta=1.0)
    assert list(z.astype(np.float64)) == [1.0 + 2.0 ** -7, 1.0, 256.0]


def rounded_independently(x, bits):
    """x rounded to `bits` significand bits in float64 arithmetic (np.round: ties to even)."""
    x = x.astype(np.float64)
    exponent = np.floor(np.log2(np.abs(np.where(x == 0, 1.0, x))))
    scale = 2.0 ** (bits - exponent)
    return np.round(x * scale) / scale


@pytest.mark.parametrize("compute_type, bits", [("tf32", 10), ("bf16", 7)])
def test_significand_rounding(compute_type, bits):
    rng = np.random.default_rng(1)
    x = (rng.standard_normal(4000) * 10.0 ** rng.integers(-20, 20, 4000)).astype(np.float32)
    x[:3] = [0.0, 1.0 + 2.0 ** -11, 1.0 + 3 * 2.0 ** -11]    # exact, and two ties for tf32
    got = round_operand(np, x, compute_type)
    np.testing.assert_array_equal(got.astype(np.float64), rounded_independently(x, bits))
    if compute_type == "bf16":
        np.testing.assert_array_equal(got, x.astype(BF16).astype(F32))


@pytest.mark.parametrize("table", [cpu.KERNELS, reference.KERNELS], ids=["cpu", "reference"])
@pytest.mark.parametrize("compute_type", ["tf32", "bf16", "fp16"])
def test_fast_gemm_equals_product_of_rounded_inputs(table, compute_type):
    """fp32 inputs rounded to the reduced type, products summed in fp32 (float64 here)."""
    rng = np.random.default_rng(2)
    a = np.asfortranarray(rng.standard_normal((9, 40, 3)).astype(np.float32))
    b = np.asfortranarray(rng.standard_normal((40, 7, 3)).astype(np.float32))
    c = np.zeros((9, 7, 3), dtype=np.float32, order="F")
    table["gemm"](a, b, c, alpha=0.5, batch_ndim=1, compute_type=compute_type)
    narrow = {"tf32": lambda v: rounded_independently(v, 10),
              "bf16": lambda v: v.astype(BF16).astype(np.float64),
              "fp16": lambda v: v.astype(F16).astype(np.float64)}[compute_type]
    want = 0.5 * np.einsum("mkb,knb->mnb", narrow(a), narrow(b))
    exact = 0.5 * np.einsum("mkb,knb->mnb", a.astype(np.float64), b.astype(np.float64))
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-5)
    assert np.abs(c - exact).max() > 100 * np.abs(c - want).max()   # the rounding is real


def test_fast_gemm_rejects_other_dtypes():
    a = np.ones((2, 2), order="F")
    with pytest.raises(TypeError, match="compute_type='tf32' applies to fp32 tiles"):
        cpu.KERNELS["gemm"](a, a, np.zeros((2, 2), order="F"), compute_type="tf32")


def test_a_view_kernel_runs_the_widened_kernel_of_its_table():
    """reshaped_call on bf16 tiles: the kernel it delegates to computes in fp32 too."""
    x = np.arange(6, dtype=np.float32).reshape(2, 3, order="F").astype(BF16)
    y = np.zeros(6, dtype=BF16)
    WIDE_CPU["reshaped_call"](x, y, view_kernel="scale", view_shapes=[(0, (6,))], alpha=2.0)
    assert np.array_equal(y.astype(F32), 2 * np.arange(6, dtype=np.float32))
