"""Fusion on real MPI ranks: the fused GPT-2 training step (fp64, uneven tiles) gives
bitwise the unfused results on every rank under every preset; verdicts are collective.

    mpiexec -n 3 python -m pytest --with-mpi -p no:cacheprovider tests/plan/test_fusion_mpi.py
"""

import numpy as np
import pytest
from helpers import adamw_gpt2_steps, collective_ok, guarded, stat_problems
from mpi4py import MPI


pytestmark = [pytest.mark.mpi(min_size=2), pytest.mark.two_ranks]
COMM = MPI.COMM_WORLD


def gpt2_results(preset, fuse, problems):
    """The step's values; stats that differ from the plan join `problems` (no raise:
    every rank must go on to the next compile, which is collective)."""
    cg, values = adamw_gpt2_steps(preset, fuse=fuse)
    problems += stat_problems(cg)
    return values


@pytest.mark.parametrize("preset", ["single", "ddp", "fsdp", "tp"])
def test_fused_gpt2_step_is_bitwise_the_unfused_one_on_mpi_ranks(preset):
    def check():
        problems = []
        unfused = gpt2_results(preset, False, problems)
        fused = gpt2_results(preset, True, problems)
        return problems + [f"rank {COMM.rank}: {name} differs"
                           for name, value in unfused.items()
                           if not np.array_equal(value, fused[name])]
    problems = guarded(check)
    assert collective_ok(COMM, not problems), problems
