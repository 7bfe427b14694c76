"""The seed's two examples (seed_examples.py) on real MPI ranks, with only their import
lines changed (and the seed's node count 8 read as the world size):

    mpiexec -n 2 python -m pytest -p no:cacheprovider --with-mpi tests/graph/test_seed_api_mpi.py
    mpiexec -n 4 ...   (four_ranks)

Every rank compares its results with a one-process run of the same layer
(SimulatedWorld(1), the same initialisation) in fp64, and the ranks agree on the verdict.
"""

import tempfile

import numpy as np
import pytest
import seed_examples as ex
from helpers import assert_no_rank_has_problems, guarded
from mpi4py import MPI

import nntile_spmd as nt

pytestmark = [pytest.mark.mpi(min_size=2), pytest.mark.four_ranks]
COMM = MPI.COMM_WORLD


@pytest.fixture
def shared_folder(monkeypatch):
    """A folder every rank sees, made the working directory."""
    folder = COMM.bcast(tempfile.mkdtemp(prefix="seed_api_") if COMM.rank == 0 else None)
    monkeypatch.chdir(folder)
    return folder


def shared_checkpoint(dtype):
    """checkpoint.pt written by rank 0; its arrays on every rank."""
    arrays = ex.write_checkpoint("checkpoint.pt", dtype) if COMM.rank == 0 else None
    return COMM.bcast(arrays)


def one_process_layer(x, dy):
    physical = nt.PhysicalGraph(ex.layer_graph(), comm=nt.SimulatedWorld(1))
    exe = nt.ExecutableGraph(physical)
    exe.init_parameters("xavier_uniform")
    exe.bind_input("input", x)
    exe.execute()
    exe.bind_output_grad("output", dy)
    exe.backward()
    return exe.get_output("output"), exe.get_parameter_grad("W_query")


def approach_e_problems():
    ns = ex.run_example(ex.APPROACH_E, ranks=COMM.size, dtype="fp64")
    output, grad = one_process_layer(ns["input_tensor"], ns["output_grad"])
    problems = []
    for what, got, want in (("output", ns["output"], output),
                            ("W_query gradient", ns["w_query_grad"], grad)):
        error = float(np.abs(got - want).max())
        if not error <= 1e-12:
            problems.append(f"{what} differs from one process by {error:.3g}")
    if ns["physical_tp"].tiling("W_query").grid != (1, COMM.size):
        problems.append(f"TP tiling {ns['physical_tp'].tiling('W_query')}")
    return problems


def section_5_2_problems(checkpoint):
    ns = ex.run_example(ex.SECTION_5_2, ranks=COMM.size)   # fp32: ComputeGraph's default
    p = {name: value.astype(np.float64) for name, value in checkpoint.items()}
    want = ex.layer_norm_last(ex.layer(np.zeros((5, 3, 12)), p), p["ln_gamma"], p["ln_beta"])
    error = float(np.abs(ns["output"] - want).max())
    return [] if error <= 1e-5 else [f"§5.2 output differs from NumPy by {error:.3g}"]


def test_approach_e_example_on_every_rank(shared_folder):
    shared_checkpoint("float64")
    assert_no_rank_has_problems(COMM, guarded(approach_e_problems))


def test_section_5_2_example_on_every_rank(shared_folder):
    checkpoint = shared_checkpoint("float32")
    assert_no_rank_has_problems(COMM, guarded(section_5_2_problems, checkpoint))


def test_num_nodes_other_than_the_world_is_an_error_on_every_rank():
    with pytest.raises(ValueError, match=f"num_nodes={COMM.size + 1}"):
        nt.PhysicalGraph(ex.layer_graph(), num_nodes=COMM.size + 1)


def async_problems():
    """Two steps: the second batch bound while the first runs; results as if in turn."""
    physical = nt.PhysicalGraph(ex.layer_graph(), num_nodes=COMM.size)
    physical.set_distribution("ddp")
    exe = nt.ExecutableGraph(physical)
    exe.init_parameters("xavier_normal")
    params = {name: exe.get_output(name) for name in ex.PARAMETERS if name[0] == "W"}
    batches = [ex.example_inputs(np.float64, seed)["input_tensor"] for seed in (3, 4)]
    exe.bind_input("input", batches[0])
    handle = exe.execute_async()
    exe.bind_input("input", batches[1])     # staged until the next execute
    handle.result()
    first = exe.get_output("output")
    group = nt.TaskGroup([exe.execute_async()])
    group.wait_all()
    second = exe.get_output("output")
    errors = [float(np.abs(got - ex.layer(batch, params)).max())
              for got, batch in zip((first, second), batches)]
    return [f"step {i} differs from NumPy by {e:.3g}" for i, e in enumerate(errors)
            if not e <= 1e-12]


def test_execute_async_on_every_rank():
    assert_no_rank_has_problems(COMM, guarded(async_problems))
