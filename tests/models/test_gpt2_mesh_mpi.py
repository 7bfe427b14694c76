"""dp x tp, fsdp x tp and dp x fsdp (HSDP) meshes on 4 real MPI ranks: GPT-2 (fp64)
matches transformers and the MLP trains to the losses of one rank (collective
verdicts; other world sizes skip, a 2 x 2 mesh needs 4 ranks); and GPT-2 with
activation recomputation equals GPT-2 without it bitwise on any number of ranks:
    mpiexec -n 4 python -m pytest --with-mpi -m mpi -p no:cacheprovider tests/models"""

import numpy as np
import pytest
from gpt2_helpers import SMALL_TILES, hf_reference, parity_problems, run_ours
from helpers import assert_no_rank_has_problems, guarded, on_rank_zero, stat_problems

import nntile_spmd as nt
from nntile_spmd.models import build_mlp
from nntile_spmd.train import Trainer

mpi4py = pytest.importorskip("mpi4py")
from mpi4py import MPI  # noqa: E402

pytestmark = pytest.mark.four_ranks
MESHES = [{"dp": 2, "tp": 2}, {"fsdp": 2, "tp": 2}, {"dp": 2, "fsdp": 2}]   # last: HSDP
IDS = ["dp2xtp2", "fsdp2xtp2", "dp2xfsdp2"]


@pytest.fixture(scope="module")
def reference():
    return on_rank_zero(MPI.COMM_WORLD, hf_reference)


def collective_verdict(work):
    comm = MPI.COMM_WORLD
    if comm.size != 4:
        pytest.skip(f"a 2 x 2 mesh needs 4 ranks, this world has {comm.size}; it runs "
                    "in the 4-rank MPI pass of scripts/test-all (CI)")
    assert_no_rank_has_problems(comm, guarded(work, comm))


@pytest.mark.mpi(min_size=4)
@pytest.mark.parametrize("tiles", [None, SMALL_TILES], ids=["auto", "small"])
@pytest.mark.parametrize("mesh", MESHES, ids=IDS)
def test_mpi_gpt2_mesh_parity(reference, mesh, tiles):
    config, state, ids, targets, hf = reference

    def work(comm):
        model, cg = run_ours(config, state, ids, targets, comm, mesh, tiles)
        problems = parity_problems(model, cg, hf)
        cg.check_stats()
        return problems

    collective_verdict(work)


@pytest.mark.mpi(min_size=4)
@pytest.mark.parametrize("mesh", MESHES, ids=IDS)
def test_mpi_mlp_mesh_trains_as_one_rank(mesh):
    rng = np.random.default_rng(1)
    data = {"x": np.asfortranarray(rng.standard_normal((12, 26))),
            "y": rng.integers(0, 5, 26).astype(np.int64)}

    def losses(comm, distribution):
        model = build_mlp([12, 10, 5], 13, dtype="fp64")
        trainer = Trainer(model, "adam", comm=comm, distribution=distribution, progress=False,
                          tiling=nt.TilingStrategy.manual({"x": [5, 3], "w1": [3, 5]}))
        trainer.bind_params(model.init_params(np.random.default_rng(0)))
        return trainer.fit(data, 3)

    def work(comm):
        ours, single = losses(comm, mesh), losses(nt.SimulatedWorld(1), "single")
        return [] if np.allclose(ours, single, rtol=1e-12) else [f"losses {ours} != {single}"]

    collective_verdict(work)


@pytest.mark.mpi(min_size=2)
@pytest.mark.two_ranks
@pytest.mark.parametrize("distribution", ["ddp", "fsdp", "tp"])
def test_mpi_recompute_is_bitwise_equal(reference, distribution):
    """build_gpt2(recompute=True) on real ranks (each plans its own program alone):
    loss and gradients bitwise those without recomputation; any world size."""
    from gpt2_helpers import BATCH, SEQ

    from nntile_spmd.models import gpt2
    config, state, ids, targets, _ = reference

    problems = []   # stats that differ: collected, not raised (the next compile is collective)

    def values(comm, recompute):
        model = gpt2.build_gpt2(config, batch=BATCH, seq=SEQ, dtype="fp64",
                                recompute=recompute)
        cg = nt.compile(model.graph, comm=comm, distribution=distribution,
                        tiling=nt.TilingStrategy.manual(SMALL_TILES))
        model.load_hf_state_dict(cg, state)
        cg.bind_data("input_ids", ids)
        cg.bind_data("targets", targets)
        cg.execute()
        problems.extend(stat_problems(cg))
        return [cg.get_output("loss")] + [cg.get_output(g.name) for g in model.grads]

    comm = MPI.COMM_WORLD
    try:
        plain, again = values(comm, False), values(comm, True)
        problems += [f"value {i} differs" for i, (a, b) in enumerate(zip(plain, again))
                     if not np.array_equal(a, b)]
    except Exception as error:   # reported collectively below
        problems.append(f"{type(error).__name__}: {error}")
    assert_no_rank_has_problems(comm, problems)
