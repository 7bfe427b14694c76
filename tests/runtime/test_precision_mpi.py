"""bf16 tiles over real MPI: the results match the NumPy reference, and each rank
measures what the plan says: half the bytes of the same plan in fp32.

    mpiexec -n 3 python -m pytest --with-mpi -p no:cacheprovider tests/runtime/test_precision_mpi.py
"""

import pytest
from helpers import collective_ok, guarded, stat_problems
from mpi4py import MPI
from precision_cases import differences, layer_inputs, reference, run_layer

pytestmark = pytest.mark.mpi(min_size=2)
COMM = MPI.COMM_WORLD


@pytest.mark.parametrize("preset", ["ddp", "fsdp", "tp"])
def test_bf16_layer_over_mpi(preset):
    def check():
        values = layer_inputs()
        got, cg = run_layer("bf16", None, preset, values)
        problems = differences(got, reference(values)) + stat_problems(cg)
        sent_bf16 = cg.get_stats().bytes_transferred
        _, cg32 = run_layer("fp32", None, preset, values)
        sent_fp32 = cg32.get_stats().bytes_transferred
        if sent_fp32 != 2 * sent_bf16:
            problems.append(f"rank {COMM.rank}: sent {sent_bf16} bytes in bf16, "
                            f"{sent_fp32} in fp32")
        total = COMM.allreduce(sent_bf16)
        if total == 0:
            problems.append("no bytes moved: the test exercises no transfer")
        return problems
    problems = guarded(check)
    assert collective_ok(COMM, not problems), problems
