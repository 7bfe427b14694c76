"""16-bit tiles on the GPU compute in fp32 and round on store, as on the CPU.

Marked gpu (tests/conftest.py skips it without CuPy or a CUDA device). Once, the
fp16 entries of the compiled rules raised KeyError: '__import__' inside CuPy, and bf16
was refused on the GPU. Here every case of the kernel table runs through the widened
cuda table (what a GPU rank of a 16-bit graph calls) in bf16 and fp16, against the fp32
NumPy reference on the same values rounded to the tile dtype; the compiled rules run
on strided and aliased 16-bit tiles; a bf16 graph on the GPU gives the CPU's results.
"""

import ml_dtypes
import numpy as np
import pytest
from helpers import LOOPED_RULES, RULE_PARAMS
from tests.kernels.kernel_cases import CASES, distinct, make_arrays

import nntile_kernels
import nntile_spmd as nt
from nntile_kernels import reference
from nntile_kernels.formulas import ELEMENTWISE
from nntile_kernels.widen import widen_table
from nntile_spmd.runtime.device import kernel_output_counts

pytestmark = pytest.mark.gpu

BF16, F16, F32 = np.dtype(ml_dtypes.bfloat16), np.dtype(np.float16), np.dtype(np.float32)
# two units in the last place: CUDA's fp32 math differs from NumPy's in the last bits,
# which may flip one rounding of a stored result
TOLERANCE = {BF16: 2.0 ** -7, F16: 2.0 ** -10}
COUNTS = kernel_output_counts()


@pytest.fixture(scope="module")
def cuda():
    """(cupy, raw cuda table, widened cuda table)."""
    import cupy

    table = nntile_kernels.get_kernels("cuda")
    return cupy, table, widen_table(table, COUNTS, cupy)


def as_fp32(arrays):
    copies = {id(a): a.astype(F32, order="F") for a in arrays if a.dtype in (BF16, F16)}
    return [copies.get(id(a), a) for a in arrays]


def assert_rounded_like(got, want, dtype, what):
    """`got` (host, 16-bit) within two ulps of the fp32 `want` rounded to `dtype`."""
    tolerance = TOLERANCE[dtype]
    np.testing.assert_allclose(got.astype(np.float64), want.astype(dtype).astype(np.float64),
                               rtol=tolerance, atol=tolerance, equal_nan=True, err_msg=what)


@pytest.mark.parametrize("dtype", [BF16, F16], ids=["bf16", "fp16"])
@pytest.mark.parametrize(("name", "args", "params"), CASES)
def test_widened_cuda_kernel_is_fp32_reference_rounded(cuda, name, args, params, dtype):
    cupy, _, wide = cuda
    host = make_arrays(args, dtype)
    expected = as_fp32(make_arrays(args, dtype))
    reference.KERNELS[name](*expected, **params)
    device = {id(a): cupy.array(a, order="F") for a in host}
    arrays = [device[id(a)] for a in host]
    assert wide[name](*arrays, **params) is None
    for position in distinct(host):
        got = cupy.asnumpy(arrays[position])
        assert got.dtype == host[position].dtype, f"{name}: argument {position}"
        if got.dtype in TOLERANCE:
            assert_rounded_like(got, expected[position], got.dtype, f"{name}: {position}")
        else:
            np.testing.assert_allclose(got, expected[position], rtol=1e-5, atol=1e-5,
                                       equal_nan=True, err_msg=f"{name}: {position}")


@pytest.mark.parametrize("dtype", [BF16, F16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("name", LOOPED_RULES)
def test_compiled_rule_on_strided_and_aliased_16_bit_tiles(cuda, name, dtype):
    """The raw table entry (no widening around it): fp32 kernel, rounded on store."""
    cupy, table, _ = cuda
    rule, params = ELEMENTWISE[name], RULE_PARAMS.get(name, {})
    rng = np.random.default_rng(0)
    low = 0.5 if name.startswith("sqrt") else -2.0
    host = [rng.uniform(low, 2.0, (40, 30)).astype(dtype) for _ in (*rule.inputs, 0)]
    views = [np.asfortranarray(a)[::2, 1::3] for a in host]
    device = [cupy.asarray(np.asfortranarray(a), order="F")[::2, 1::3] for a in host]
    expected = as_fp32(views)
    reference.KERNELS[name](*expected, **params)
    table[name](*device, **params)
    assert_rounded_like(cupy.asnumpy(device[-1]), expected[-1], dtype, name)
    if not rule.inputs:        # add_scalar: its output is its only tile, nothing to alias
        return
    inputs = [cupy.asarray(np.asfortranarray(a)) for a in host[:-1]]
    expected = [a.astype(F32) for a in host[:-1]]
    if rule.accumulate:        # dx += f(x) * dy with dx the very dy array
        reference.KERNELS[name](*expected, expected[-1], **params)
        table[name](*inputs, inputs[-1], **params)
    else:                      # y = f(x, ...) with y the very x array
        reference.KERNELS[name](*expected, expected[0], **params)
        table[name](*inputs, inputs[0], **params)
    assert_rounded_like(cupy.asnumpy(inputs[-1]), expected[-1], dtype, f"{name} in place")


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_16_bit_graph_on_the_gpu_equals_the_cpu(dtype):
    """cast -> gelu -> multiply -> cast on 2 simulated ranks: the CPU's values (two
    ulps: CUDA's erf is not numba's)."""
    g = nt.LogicalGraph("half")
    x = g.tensor([33, 17], "x", dtype="fp32", external=True)
    h = nt.ops.gelu(nt.ops.cast(x, dtype, "h"), "a")
    nt.ops.cast(nt.ops.multiply(h, h, "m"), "fp32", "y").mark_output()
    data = np.random.default_rng(0).standard_normal((33, 17)).astype(np.float32)
    results = []
    for device in ("cpu", "cuda"):
        cg = nt.compile(g, comm=nt.SimulatedWorld(2), device=device, distribution="ddp",
                        tiling=nt.TilingStrategy.manual({"x": [8, 9]}))
        cg.bind_data("x", data)
        cg.execute()
        results.append(cg.get_output("y"))
    tolerance = 4 * TOLERANCE[BF16 if dtype == "bf16" else F16]
    np.testing.assert_allclose(results[1], results[0], rtol=tolerance, atol=tolerance)
