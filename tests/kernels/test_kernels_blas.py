"""cpu gemm's numba batch loop calls the BLAS routine scipy.linalg.blas wraps: its
results must be bitwise those of one scipy call per batch element."""

import numpy as np
import pytest
from scipy.linalg import blas

from nntile_kernels import cpu_blas
from nntile_kernels.layout import gemm_folds


def scipy_gemm(a, b, c, alpha, beta, trans_a, trans_b, ndim, batch_ndim):
    routine = blas.sgemm if c.dtype == np.float32 else blas.dgemm
    a3, b3, c3 = gemm_folds(a.shape, b.shape, trans_a, trans_b, ndim, batch_ndim)
    a_view, b_view = a.reshape(a3, order="F"), b.reshape(b3, order="F")
    c_view = c.reshape(c3, order="F")
    for index in range(c3[2]):
        c_view[:, :, index] = routine(alpha, a_view[:, :, index], b_view[:, :, index], beta,
                                      c_view[:, :, index].copy(order="F"), trans_a, trans_b)


CASES = [  # (a shape, b shape, trans_a, trans_b, ndim, batch_ndim)
    ((7, 5), (5, 3), False, False, 1, 0),
    ((5, 7), (5, 3), True, False, 1, 0),
    ((7, 5), (3, 5), False, True, 1, 0),
    ((5, 7), (3, 5), True, True, 1, 0),
    ((6, 4, 3, 2), (4, 3, 5, 2), False, False, 2, 1),     # two K dims, a batch dim
    ((16, 9, 3, 4), (16, 11, 3, 4), True, False, 1, 2),   # attention-like: two batch dims
    ((9, 16, 3, 4), (11, 16, 3, 4), False, True, 1, 2),
    ((4, 0), (0, 3), False, False, 1, 0),                 # empty K: C = beta*C
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("alpha,beta", [(1.0, 0.0), (0.125, 1.0), (-2.0, 0.5)])
def test_batched_blas_bitwise_scipy(dtype, case, alpha, beta):
    a_shape, b_shape, trans_a, trans_b, ndim, batch_ndim = case
    rng = np.random.default_rng(0)
    a = np.asfortranarray(rng.standard_normal(a_shape).astype(dtype))
    b = np.asfortranarray(rng.standard_normal(b_shape).astype(dtype))
    _, _, c3 = gemm_folds(a_shape, b_shape, trans_a, trans_b, ndim, batch_ndim)
    a_end, b_end = len(a_shape) - batch_ndim, len(b_shape) - batch_ndim
    m_dims = a_shape[ndim:a_end] if trans_a else a_shape[:a_end - ndim]
    n_dims = b_shape[:b_end - ndim] if trans_b else b_shape[ndim:b_end]
    c_shape = (*m_dims, *n_dims, *a_shape[a_end:])
    assert int(np.prod(c_shape)) == int(np.prod(c3))
    c = np.asfortranarray(rng.standard_normal(c_shape).astype(dtype))
    expected = c.copy(order="F")
    scipy_gemm(a, b, expected, alpha, beta, trans_a, trans_b, ndim, batch_ndim)
    cpu_blas.gemm(a, b, c, alpha=alpha, beta=beta, trans_a=trans_a, trans_b=trans_b, ndim=ndim,
                  batch_ndim=batch_ndim)
    assert np.array_equal(c, expected)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", [case for case in CASES if case[4:] == (1, 0)] +
                         [((256, 300), (300, 130), False, False, 1, 0)])
@pytest.mark.parametrize("beta", [0.0, 1.0])
def test_matrix_fast_path_is_bitwise_the_numba_loop(dtype, case, beta):
    """One F-ordered matrix product goes through f2py; the folded path must agree."""
    a_shape, b_shape, trans_a, trans_b, _, _ = case
    rng = np.random.default_rng(1)
    a = np.asfortranarray(rng.standard_normal(a_shape).astype(dtype))
    b = np.asfortranarray(rng.standard_normal(b_shape).astype(dtype))
    m = a_shape[1] if trans_a else a_shape[0]
    n = b_shape[0] if trans_b else b_shape[1]
    c = np.asfortranarray(rng.standard_normal((m, n)).astype(dtype))
    folded = c.copy(order="F")
    params = dict(alpha=0.75, beta=beta, trans_a=trans_a, trans_b=trans_b)
    cpu_blas.gemm(a, b, c, **params)
    cpu_blas.folded_gemm(a, b, folded, **params, ndim=1, batch_ndim=0, compute_type=None)
    assert np.array_equal(c, folded)


# A fresh process: importing the cpu kernels, then limiting BLAS to one thread as the
# runtime does, then timing 256^3 products against 1024^3 ones (process CPU time). Where
# the products of a process start under the limit, the small ones run at about a quarter
# of the large ones' rate until a large one has run; cpu_blas.start_blas_threads at
# import prevents that.
SMALL_PRODUCTS_RATE = """
import time, numpy as np
from threadpoolctl import threadpool_limits
from nntile_kernels import cpu_blas
rates = {}
with threadpool_limits(limits=1, user_api="blas"):
    # the small ones first: one large product would bring them back to speed
    for size, calls in ((256, 32), (256, 32), (256, 32), (1024, 2), (1024, 2)):
        a = np.asfortranarray(np.random.default_rng(0).standard_normal((size, size),
                                                                      dtype=np.float32))
        c = np.zeros((size, size), np.float32, order="F")
        start = time.process_time()
        for _ in range(calls):
            cpu_blas.gemm(a, a, c, beta=1.0)
        rate = 2.0 * size ** 3 * calls / max(time.process_time() - start, 1e-9)
        rates[size] = max(rates.get(size, 0.0), rate)
print(rates[256] / rates[1024])
"""


@pytest.mark.slow
def test_small_products_run_at_speed_under_a_one_thread_limit():
    import subprocess
    import sys
    result = subprocess.run([sys.executable, "-c", SMALL_PRODUCTS_RATE], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    # the slow start runs the small products at about a quarter of the large ones' rate;
    # 0.4 sits between that and a healthy process's rate, with room for a noisy clock
    assert float(result.stdout) > 0.4, f"256^3 at {float(result.stdout):.2f} of 1024^3's rate"
