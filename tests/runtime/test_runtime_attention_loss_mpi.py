"""Attention and cross-entropy on real MPI ranks against one-process NumPy references.

    mpiexec -n 2 python -m pytest --with-mpi -m mpi -p no:cacheprovider tests/runtime/test_runtime_attention_loss_mpi.py
    mpiexec -n 3 python -m pytest --with-mpi -m mpi -p no:cacheprovider tests/runtime/test_runtime_attention_loss_mpi.py

Every rank checks its part and the ranks all-reduce the verdict (helpers.collective_ok);
an error inside a run becomes that rank's verdict, and receives time out instead of hanging.
"""
# ruff: noqa: E501 - the usage lines above are commands

import pytest
from helpers import collective_ok, guarded
from mpi4py import MPI
from test_runtime_attention import DISTRIBUTIONS, run_attention
from test_runtime_cross_entropy import check_against_numpy

pytestmark = pytest.mark.mpi(min_size=2)
COMM = MPI.COMM_WORLD


@pytest.mark.parametrize("distribution", DISTRIBUTIONS)
def test_causal_attention_on_mpi_ranks(distribution):
    """Sequence and head_dim in uneven tiles; round_robin puts key tiles on different ranks."""
    problems = guarded(lambda: run_attention(None, distribution)[0])
    assert collective_ok(COMM, not problems), problems


@pytest.mark.parametrize("distribution", DISTRIBUTIONS)
def test_cross_entropy_on_mpi_ranks(distribution):
    """Loss and gradient with ignored labels; the vocabulary in uneven tiles (vocab-parallel
    under tp and round_robin: partial logsumexps and losses meet across ranks)."""
    problems = guarded(check_against_numpy, None, distribution)
    assert collective_ok(COMM, not problems), problems
