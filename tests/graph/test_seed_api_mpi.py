"""The seed's two examples (seed_examples.py) on real MPI ranks, with only their import
lines changed:

    mpiexec -n 2 python -m pytest -p no:cacheprovider --with-mpi tests/graph/test_seed_api_mpi.py
    mpiexec -n 4 ...   (four_ranks)

Approach E plans 8 nodes (num_nodes=8), folded onto the 1, 2 or 4 ranks: every rank
compares its results with the unfolded run of the same script on nt.SimulatedWorld(8)
(computed on rank 0), bitwise, and with NumPy; on 3 ranks the script stops at its first
PhysicalGraph with a clear error. The ranks agree on the verdict.
"""

import tempfile

import numpy as np
import pytest
import seed_examples as ex
from helpers import assert_no_rank_has_problems, guarded, on_rank_zero
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


GRAPHS = ("physical_fsdp", "physical_ddp", "physical_tp")


def unfolded_run():
    """Approach E on nt.SimulatedWorld(8): its output, W_query gradient, memory_on_node(0)."""
    ns = ex.run_example(ex.APPROACH_E, world=nt.SimulatedWorld(ex.SEED_NODES))
    return ns["output"], ns["w_query_grad"], [ns[g].memory_on_node(0) for g in GRAPHS]


def approach_e_problems(ns, unfolded):
    output, grad, memories = unfolded
    problems = [f"{what} differs from the 8-rank run" for what, got, want in
                (("output", ns["output"], output), ("W_query gradient", ns["w_query_grad"], grad))
                if not np.array_equal(got, want)]
    params = {name: ns["exe"].get_output(name).astype(np.float64)
              for name in ("W_query", "W_key", "W_value", "W_out")}
    error = float(np.abs(ns["output"] - ex.layer(ns["input_tensor"], params)).max())
    if not error <= 1e-5:
        problems.append(f"output differs from NumPy by {error:.3g}")
    got_memories = [ns[g].memory_on_node(0) for g in GRAPHS]
    if got_memories != memories:
        problems.append(f"memory_on_node(0) {got_memories}, the 8-rank run's {memories}")
    if ns["physical_tp"].tiling("W_query").grid != (1, ex.SEED_NODES):
        problems.append(f"TP tiling {ns['physical_tp'].tiling('W_query')}")
    return problems


def section_5_2_problems(checkpoint):
    ns = ex.run_example(ex.SECTION_5_2)   # fp32: ComputeGraph's default
    p = {name: value.astype(np.float64) for name, value in checkpoint.items()}
    zero_input = np.zeros((5, 3, ex.EMBED))   # §5.2 executes without binding its input
    want = ex.layer_norm_last(ex.layer(zero_input, p), p["ln_gamma"], p["ln_beta"])
    error = float(np.abs(ns["output"] - want).max())
    return [] if error <= 1e-5 else [f"§5.2 output differs from NumPy by {error:.3g}"]


def test_approach_e_example_on_every_rank(shared_folder):
    shared_checkpoint("float32")
    if ex.SEED_NODES % COMM.size:   # 3 ranks: 8 nodes do not fold onto them
        with pytest.raises(ValueError, match=f"num_nodes=8.*{COMM.size} rank.*multiple"):
            ex.run_example(ex.APPROACH_E)
        return
    run = {}
    problems = guarded(lambda: run.update(ex.run_example(ex.APPROACH_E)) or [])
    unfolded = on_rank_zero(COMM, unfolded_run)
    assert_no_rank_has_problems(COMM, problems or guarded(approach_e_problems, run, unfolded))


def folded_layer(nodes, comm=None):
    """The layer in fp64 on `nodes` FSDP nodes (uneven tiles): output and gradients."""
    physical = nt.PhysicalGraph(ex.layer_graph(), num_nodes=nodes, comm=comm)
    physical.set_tiling(nt.TilingStrategy.manual({"input": [2, 2, 5], "W_query": [5, 3]}))
    nt.DistributionPreset.apply_fsdp(physical, num_nodes=nodes)
    exe = nt.ExecutableGraph(physical)
    exe.init_parameters("kaiming_uniform", seed=7)
    inputs = ex.example_inputs(np.float64, seed=8)
    exe.bind_input("input", inputs["input_tensor"])
    exe.bind_output_grad("output", inputs["output_grad"])
    exe.backward()
    return [exe.get_output("output")] + [exe.get_parameter_grad(name)
                                         for name in ("W_query", "W_key", "W_value", "W_out")]


def test_twice_as_many_nodes_as_ranks_in_fp64():
    nodes = 2 * COMM.size
    unfolded = on_rank_zero(COMM, lambda: folded_layer(nodes, nt.SimulatedWorld(nodes)))

    def problems():
        errors = [float(np.abs(got - want).max())
                  for got, want in zip(folded_layer(nodes), unfolded)]
        return [f"{nodes} nodes folded differ from {nodes} ranks by {max(errors):.3g}"] \
            if not max(errors) <= 1e-12 else []
    assert_no_rank_has_problems(COMM, guarded(problems))


def test_section_5_2_example_on_every_rank(shared_folder):
    checkpoint = shared_checkpoint("float32")
    assert_no_rank_has_problems(COMM, guarded(section_5_2_problems, checkpoint))


def test_num_nodes_not_a_multiple_of_the_world_is_an_error_on_every_rank():
    with pytest.raises(ValueError, match=f"num_nodes={COMM.size + 1}.*multiple"):
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
