"""What pow's, add_scalar's and SGD's rules (nntile_kernels/formulas/) promise on every CPU
backend: the NumPy reference, the generated numba loops and the fused chains.

pow squares for an exponent of 2 (a case, bitwise x * x), and the numba loops follow
NumPy's power for every exponent (to an ulp or two: NumPy's SIMD power differs from
libm's in the last bit on some CPUs; the loops and the fused chain, both ours, agree
bitwise); add_scalar adds to int64 step counters;
SGD without momentum neither reads nor writes the velocity (an Update's SKIP case),
takes the gradient as the velocity at step 1, and follows PyTorch with nesterov.
"""

import numpy as np
import pytest
import torch

from helpers import assert_within_ulps
from nntile_kernels import cpu, reference
from nntile_kernels.cpu_fused import fused_kernel
from nntile_kernels.rules import SKIP, Update

TABLES = [cpu.KERNELS, reference.KERNELS]
TABLE_IDS = ["cpu", "reference"]
DTYPES = [np.float32, np.float64]


def tile(dtype, seed, low=-2.0, high=2.0, shape=(33, 17)):
    rng = np.random.default_rng(seed)
    return np.asfortranarray(rng.uniform(low, high, shape).astype(dtype))


def fused_pow(x, y, **params):
    """pow as a fused chain of one step (the plan's fused loops)."""
    fused_kernel("fused[pow(0>1)]")(x, y, **{f"s0_{k}": v for k, v in params.items()})


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kernel", [*TABLES, fused_pow], ids=[*TABLE_IDS, "fused"])
def test_pow_of_exponent_2_is_x_times_x_bitwise(kernel, dtype):
    x = tile(dtype, 0)
    y = np.full_like(x, np.nan)
    (kernel["pow"] if isinstance(kernel, dict) else kernel)(x, y, alpha=-1.5, exp=2.0)
    np.testing.assert_array_equal(y, dtype(-1.5) * (x * x))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("table", TABLES, ids=TABLE_IDS)
def test_pow_backward_of_exponent_2_is_linear_bitwise(table, dtype):
    x, dy, dx = tile(dtype, 0), tile(dtype, 1), tile(dtype, 2)
    expected = dx + dtype(0.5 * 2.0) * x * dy
    table["pow_backward"](x, dy, dx, alpha=0.5, exp=2.0)
    np.testing.assert_array_equal(dx, expected)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("exponent", [3.0, -0.5, 0.5, -1.0, 1.5, 2.0])
def test_the_loops_and_the_fused_chain_compute_numpys_power(exponent, dtype):
    """The numba loop and the fused chain are one computation: bitwise equal. Against
    NumPy's power (the reference) they agree to 2 ulps: NumPy squares, roots and inverts
    exactly as the loops do (numpy_power), but elsewhere its SIMD power may differ from
    libm's in the last bit (pow_backward with exponent 3 squares too)."""
    x, dy = tile(dtype, 3, 0.1, 4.0), tile(dtype, 4)
    loop, want, fused = (np.empty_like(x) for _ in range(3))
    cpu.KERNELS["pow"](x, loop, alpha=2.0, exp=exponent)
    reference.KERNELS["pow"](x, want, alpha=2.0, exp=exponent)
    fused_pow(x, fused, alpha=2.0, exp=exponent)
    np.testing.assert_array_equal(fused, loop)
    assert_within_ulps(loop, want, ulps=2)
    backward = []
    for table in TABLES:
        dx = dy.copy(order="F")
        table["pow_backward"](x, dy, dx, alpha=2.0, exp=exponent + 1.0)
        backward.append(dx)
    term = 2.0 * (exponent + 1.0) * x.astype(np.float64) ** exponent * dy
    assert_within_ulps(*backward, ulps=4, scale=np.abs(dy) + np.abs(term))


@pytest.mark.parametrize("table", TABLES, ids=TABLE_IDS)
def test_add_scalar_steps_an_int64_counter_and_shifts_a_float_tile(table):
    counter = np.array(6)
    table["add_scalar"](counter, value=1)
    table["add_scalar"](counter, value=1.0)     # a float param, cast to the tile dtype
    assert counter.dtype == np.int64 and counter[()] == 8
    x = tile(np.float32, 5)
    expected = x + np.float32(1e-5)
    table["add_scalar"](x, value=1e-5)
    np.testing.assert_array_equal(x, expected)


def garbage(like):
    """A tile of NaNs with a payload: a write of anything, NaN included, shows."""
    bits = np.full(like.shape, 0x7FF4DEADBEEF0001 if like.dtype == np.float64 else 0x7FA0BEEF,
                   np.uint64 if like.dtype == np.float64 else np.uint32)
    return np.asfortranarray(bits).view(like.dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("table", TABLES, ids=TABLE_IDS)
@pytest.mark.parametrize("step", [1, 4])
def test_sgd_without_momentum_leaves_a_garbage_velocity_untouched(table, dtype, step):
    grad, param = tile(dtype, 6), tile(dtype, 7)
    velocity = garbage(param)
    before = velocity.tobytes()
    expected = param - dtype(0.1) * (grad + dtype(0.01) * param)
    table["sgd_step"](np.array(step), grad, param, velocity, lr=0.1, momentum=0.0,
                      weight_decay=0.01, nesterov=True)
    assert velocity.tobytes() == before
    np.testing.assert_array_equal(param, expected)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("table", TABLES, ids=TABLE_IDS)
def test_sgd_does_not_read_the_velocity_at_step_1(table, dtype):
    grad, param = tile(dtype, 8), tile(dtype, 9)
    velocity = garbage(param)
    g = grad + dtype(0.01) * param
    expected = param - dtype(0.1) * g
    table["sgd_step"](np.array(1), grad, param, velocity, lr=0.1, momentum=0.9,
                      weight_decay=0.01, dampening=0.5)
    np.testing.assert_array_equal(velocity, g)
    np.testing.assert_array_equal(param, expected)


@pytest.mark.parametrize("nesterov", [False, True])
@pytest.mark.parametrize("table", TABLES, ids=TABLE_IDS)
def test_sgd_follows_pytorch(table, nesterov):
    """Three steps of torch.optim.SGD (fp64), with momentum, dampening, weight decay."""
    hyper = dict(lr=0.1, momentum=0.9, weight_decay=0.01, dampening=0.0 if nesterov else 0.2,
                 nesterov=nesterov)
    param, velocity = tile(np.float64, 10), garbage(tile(np.float64, 10))
    weight = torch.nn.Parameter(torch.from_numpy(param.copy()))
    optimizer = torch.optim.SGD([weight], **hyper)
    for step in (1, 2, 3):
        grad = tile(np.float64, 20 + step)
        weight.grad = torch.from_numpy(grad.copy())
        optimizer.step()
        table["sgd_step"](np.array(step), grad, param, velocity, **hyper)
        np.testing.assert_allclose(param, weight.detach().numpy(), rtol=1e-14, atol=1e-15)


@pytest.mark.parametrize("nesterov", [False, True])
def test_cpu_and_reference_sgd_agree_bitwise(nesterov):
    """The loop and the array expressions do the same arithmetic in the same order."""
    results = []
    for kernel in (cpu.KERNELS["sgd_step"], reference.KERNELS["sgd_step"]):
        param, velocity = tile(np.float32, 11), tile(np.float32, 12)
        for step in (1, 2):
            kernel(np.array(step), tile(np.float32, 13 + step), param, velocity, lr=0.05,
                   momentum=0.8, weight_decay=0.1, dampening=0.3, nesterov=nesterov)
        results.append((param, velocity))
    for got, want in zip(*results):
        np.testing.assert_array_equal(got, want)


def test_a_skip_is_the_first_case_and_names_params_only():
    def update(cases):
        return Update("step", ("grad",), ("param",), ("lr",), (), (), (),
                      (("param", "param - lr * grad", cases),))
    update((("lr == 0.0", SKIP),))
    with pytest.raises(AssertionError, match="first case"):
        update((("lr == 1.0", "param"), ("lr == 0.0", SKIP)))
    with pytest.raises(AssertionError, match="params only"):
        update((("step == 1.0", SKIP),))
