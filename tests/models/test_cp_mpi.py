"""Context parallelism on real MPI ranks: GPT-2 and Llama (fp64) under {"cp": world size}
(2 and 3 ranks) and {"fsdp": 2, "cp": 2} (4 ranks) match transformers (the parity
contract's tolerances) and one rank (1e-12 relative), and measure the planned bytes,
peak and FLOPs; collective verdicts:
    mpiexec -n 3 python -m pytest --with-mpi -m mpi -p no:cacheprovider tests/models/test_cp_mpi.py
    mpiexec -n 4 python -m pytest --with-mpi -m "mpi and four_ranks" -p no:cacheprovider \\
        tests/models/test_cp_mpi.py
Auto tiling cuts the sequence (7 positions) into one tile per rank (cp 2: 4 + 3; cp 3:
3 + 3 + 1, uneven; fsdp x cp: 2 + 2 + 2 + 1, two per cp rank), the rest whole: the
cheapest tiling that splits the sequence (tests/plan/test_context_parallel.py covers
several tiles per rank and the zigzag layout)."""

import gpt2_helpers
import llama_helpers
import numpy as np
import pytest
from helpers import assert_no_rank_has_problems, guarded, on_rank_zero

import nntile_spmd as nt

mpi4py = pytest.importorskip("mpi4py")
from mpi4py import MPI  # noqa: E402

FAMILIES = {"gpt2": gpt2_helpers, "llama": llama_helpers}


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def family(request):
    helpers = FAMILIES[request.param]
    return helpers, on_rank_zero(MPI.COMM_WORLD, helpers.hf_reference)


def results(model, cg) -> dict:
    return {"logits": cg.get_output("logits"), "loss": cg.get_output("loss"),
            **model.hf_grads(cg)}


def check(family, distribution, comm):
    """The problems of one family's run under `distribution` (against HF and one rank)."""
    helpers, (config, state, ids, targets, hf) = family
    model, cg = helpers.run_ours(config, state, ids, targets, comm, distribution)
    problems = gpt2_helpers.parity_problems(model, cg, hf)
    ours = results(model, cg)
    single = results(*helpers.run_ours(config, state, ids, targets, nt.SimulatedWorld(1),
                                       "single"))
    for name, value in single.items():
        error = np.abs(ours[name] - value).max() / max(np.abs(value).max(), 1e-30)
        if not error < 1e-12:
            problems.append(f"{name}: {error:.1e} from one rank's")
    cg.check_stats()   # measured bytes, peak and FLOPs are the plan's
    if not cg.estimate_communication() > 0:
        problems.append("no messages planned: the sequence was not split")
    return problems


def collective_verdict(work):
    comm = MPI.COMM_WORLD
    assert_no_rank_has_problems(comm, guarded(work, comm))


@pytest.mark.mpi(min_size=2)
def test_mpi_cp_parity(family):
    if MPI.COMM_WORLD.size > 3:
        pytest.skip("cp over the whole world runs on 2 and 3 ranks (3 sequence tiles)")
    collective_verdict(lambda comm: check(family, {"cp": comm.size}, comm))


@pytest.mark.four_ranks
@pytest.mark.mpi(min_size=4)
def test_mpi_fsdp_x_cp_parity(family):
    if MPI.COMM_WORLD.size != 4:
        pytest.skip(f"a 2 x 2 mesh needs 4 ranks, this world has {MPI.COMM_WORLD.size}; "
                    "it runs in the 4-rank MPI pass of scripts/test-all (CI)")
    collective_verdict(lambda comm: check(family, {"fsdp": 2, "cp": 2}, comm))
