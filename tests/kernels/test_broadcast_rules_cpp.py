"""The broadcast rules' C++ (nntile_kernels/rules_cuda_broadcast.py), compiled for the host
by the system C++ compiler and run over tiles in memory order, against the NumPy
evaluation of the same formulas: the text and the partner index arithmetic a GPU
session would dispatch, checked without a GPU."""

import numpy as np
import pytest
from helpers import broadcast_arrays, broadcast_param_cases, kernel_keywords
from host_rules import broadcast_function, broadcast_kernel, host_source
from host_cpp import host_library as compile_host_library

from nntile_kernels import reference
from nntile_kernels.layout import fiber_folds
from nntile_kernels.formulas import BROADCAST
from nntile_kernels.rules_cuda import C_TYPES
from nntile_kernels.rules_cuda_broadcast import INDEX_SIZES

TOLERANCE = {"float64": 1e-13, "float32": 2e-5}


@pytest.fixture(scope="module")
def host_library(tmp_path_factory):
    return compile_host_library(tmp_path_factory.mktemp("broadcast_rules"),
                                host_source(BROADCAST, broadcast_function))


@pytest.mark.parametrize("dtype", sorted(C_TYPES))
@pytest.mark.parametrize("axis", [0, 1, 2])
@pytest.mark.parametrize("name", sorted(BROADCAST))
def test_cpp_of_each_broadcast_rule_matches_its_numpy_evaluation(host_library, name, axis,
                                                                   dtype):
    """A 4 x 5 x 3 x 2 tile, the last dim a fiber's batch dim; the output's unread
    contents NaN."""
    broadcast, rng = BROADCAST[name], np.random.default_rng(axis)
    shape, batch_ndim = (4, 5, 3, 2), (1 if broadcast.shape == "fiber" else 0)
    m, n, k, _ = fiber_folds(shape, axis, batch_ndim)
    names = (*broadcast.rule.inputs, broadcast.rule.output)
    arrays = broadcast_arrays(name, shape, axis, batch_ndim, dtype, rng)
    kernel = broadcast_kernel(host_library, name, dtype)
    # the params, then beta == 0 (add_slice's, add_fiber's case) with what it leaves unread NaN
    for params, tiles in broadcast_param_cases(name, arrays):
        inputs = dict(zip(names, tiles))
        got, expected = inputs[names[-1]].copy(order="F"), inputs[names[-1]].copy(order="F")
        sizes = {"inner": m, "length": n, "outer": k}
        # each tile in memory order: a Fortran-ordered tile's transpose, flattened
        kernel(*[inputs[a].T.reshape(-1) for a in broadcast.rule.inputs],
               *[sizes[s] for s in INDEX_SIZES[broadcast.shape]],
               *[float(params[p]) for p in broadcast.rule.params], got.T.reshape(-1))
        reference.KERNELS[name](*tiles[:-1], expected,
                                **kernel_keywords(broadcast.shape, axis, batch_ndim, params))
        assert not np.isnan(expected).any()
        tolerance = TOLERANCE[dtype]
        np.testing.assert_allclose(got, expected, rtol=tolerance, atol=tolerance,
                                   err_msg=f"{name} axis {axis} {params}")
