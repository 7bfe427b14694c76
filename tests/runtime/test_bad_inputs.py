"""Bad inputs fail fast with a message that says what is wrong (single process)."""

import time

import numpy as np
import pytest

import nntile_spmd as nt
from nntile_spmd.runtime.limits import check_fits_in_memory


def relu_graph(size=4, name="v"):
    g = nt.LogicalGraph(name)
    x = g.tensor([size], "x", dtype="fp64", external=True)
    nt.ops.relu(x, "y").mark_output()
    return g


def test_huge_tensor_fails_fast_naming_planned_and_available_bytes():
    g = nt.LogicalGraph("big")
    nt.ops.relu(g.tensor([10**12], "x", dtype="fp32", external=True), "y").mark_output()
    start = time.perf_counter()
    with pytest.raises(nt.PlanError, match=r"needs at least 8,000,000,000,000 bytes .* "
                       r"x\[1000000000000\]:fp32 alone is 4,000,000,000,000 bytes\) but "
                       r"[\d,]+ bytes of memory are available"):
        nt.compile(g, comm=nt.SimulatedWorld(1))
    assert time.perf_counter() - start < 1.0


def test_memory_bound_spreads_over_ranks_and_counts_simulated_ones():
    g = relu_graph(1000)     # x and y kept: 16,000 bytes in all
    check_fits_in_memory(g, 4, 1, available=4000)          # 4,000 bytes per rank
    with pytest.raises(nt.PlanError, match="needs at least 4,000 bytes"):
        check_fits_in_memory(g, 4, 1, available=3999)
    with pytest.raises(nt.PlanError, match="needs at least 16,000 bytes .*4 of 4 rank"):
        check_fits_in_memory(g, 4, 4, available=15999)     # all 4 ranks in this process


@pytest.fixture
def executed():
    cg = nt.compile(relu_graph(), comm=nt.SimulatedWorld(2))
    cg.bind_data("x", np.arange(4.0))
    return cg


def test_get_output_before_execute_raises():
    cg = nt.compile(relu_graph(), comm=nt.SimulatedWorld(2))
    cg.bind_data("x", np.arange(4.0))
    with pytest.raises(RuntimeError, match="no execute.. has computed it yet"):
        cg.get_output("y")
    assert np.array_equal(cg.get_output("x"), np.arange(4.0))   # bound: readable
    cg.execute()
    assert np.array_equal(cg.get_output("y"), np.arange(4.0))


@pytest.mark.parametrize("root", [-1, 2, 2.0, "0"])
def test_get_output_rejects_a_root_outside_the_world(executed, root):
    executed.execute()
    with pytest.raises(ValueError, match=r"root must be a rank in \[0, 1\] or None"):
        executed.get_output("y", root=root)


@pytest.mark.parametrize("call", ["bind", "execute", "get_output", "local_tiles"])
def test_changing_the_graph_after_compile_says_so(executed, call):
    g = executed.graph
    nt.ops.relu(g.tensor([4], "z", dtype="fp64", external=True), "w").mark_output()
    action = {"bind": lambda: executed.bind_data("z", np.ones(4)),
              "execute": executed.execute,
              "get_output": lambda: executed.get_output("w"),
              "local_tiles": lambda: executed.local_tiles("w")}[call]
    with pytest.raises(RuntimeError, match="the graph 'v' changed since compile"):
        action()


def one_rank(**options):
    return nt.compile(relu_graph(8), comm=nt.SimulatedWorld(1), **options)


def gpt2_with(**fields):
    from nntile_spmd.models import gpt2
    config = dict(vocab_size=32, n_positions=8, n_embd=8, n_layer=1, n_head=2) | fields
    return gpt2.build_gpt2(gpt2.GPT2Config(**config), batch=1, seq=4)


def llama_with(**fields):
    from nntile_spmd.models import llama
    config = dict(vocab_size=32, hidden_size=8, intermediate_size=16, num_hidden_layers=1,
                  num_attention_heads=2, max_position_embeddings=8) | fields
    return llama.build_llama(llama.LlamaConfig(**config), batch=1, seq=4)


# a bad call -> the error it raises at once and what its message says (before: an
# AttributeError, an IndexError, or accepted and a wrong model or plan)
BAD_CALLS = {
    "compile_none": (lambda: nt.compile(None), TypeError,
                     "compile: graph must be a LogicalGraph, got None"),
    "compile_async_none": (lambda: nt.compile_async(None), TypeError,
                           "compile_async: graph must be a LogicalGraph, got None"),
    "deterministic_no": (lambda: one_rank(deterministic="no"), TypeError,
                         "deterministic must be True or False, got 'no'"),
    "fuse_text": (lambda: one_rank(fuse="yes"), TypeError, "fuse must be True, False or None"),
    "window_float": (lambda: one_rank(window=2.5), TypeError, "window must be an int"),
    "program_of_rank_5": (lambda: one_rank().program(5), ValueError,
                          "rank 5 is not a rank of this plan's world of 1 rank(s) (0 to 0)"),
    "program_of_rank_minus_1": (lambda: one_rank().program(-1), ValueError, "rank -1 is not"),
    "memory_on_rank_5": (lambda: one_rank().memory_on_rank(5), ValueError, "rank 5 is not"),
    "communication_of_rank_5": (lambda: one_rank().estimate_communication(5), ValueError,
                                "rank 5 is not"),
    "tile_size_float": (lambda: nt.TilingStrategy.manual({"x": [2.5]}), TypeError,
                        "'x' dim 0: a tile must be a size (an int), a list of int "
                        "boundaries or None, got 2.5"),
    "tile_boundary_float": (lambda: nt.TilingStrategy.explicit({"x": [[0, 2.5, 8]]}),
                            TypeError, "got [0, 2.5, 8]"),
    "tile_size_bool": (lambda: nt.TilingStrategy.manual({"x": [True]}), TypeError, "got True"),
    "min_tile_float": (lambda: nt.TilingStrategy.auto(min_tile=2.5), TypeError,
                       "min_tile must be a positive int, got 2.5"),
    "gpt2_negative_layers": (lambda: gpt2_with(n_layer=-1), ValueError,
                             "GPT2Config: n_layer=-1 must be a positive int"),
    "gpt2_float_heads": (lambda: gpt2_with(n_head=2.0), ValueError, "n_head=2.0 must be"),
    "gpt2_zero_epsilon": (lambda: gpt2_with(layer_norm_epsilon=0.0), ValueError,
                          "layer_norm_epsilon=0.0 must be a positive finite number"),
    "llama_negative_layers": (lambda: llama_with(num_hidden_layers=-1), ValueError,
                              "LlamaConfig: num_hidden_layers=-1 must be a positive int"),
    "llama_zero_heads": (lambda: llama_with(num_attention_heads=0), ValueError,
                         "num_attention_heads=0 must be a positive int"),
}


@pytest.mark.parametrize("caller", ["compile", "compile_async"])
def test_distribution_auto_checks_the_arguments_before_its_search(caller, monkeypatch):
    from nntile_spmd.search import auto_compile
    monkeypatch.setattr(auto_compile, "autoplan",
                        lambda *args: pytest.fail("searched with a bad argument"))
    with pytest.raises(TypeError, match=f"{caller}: window must be an int"):
        getattr(nt, caller)(relu_graph(8), nt.SimulatedWorld(1), distribution="auto",
                            window=2.5)


@pytest.mark.parametrize("case", sorted(BAD_CALLS))
def test_a_bad_argument_raises_at_once_naming_it(case):
    call, error, fragment = BAD_CALLS[case]
    with pytest.raises(error) as raised:
        call()
    assert fragment in str(raised.value)


@pytest.mark.parametrize("call", ["compile", "compile_async", "build_plan"])
def test_tile_shapes_as_a_plain_dict_are_named(call):
    """Before: AttributeError: 'dict' object has no attribute 'resolve_explained'."""
    from nntile_spmd.plan.plan import build_plan
    tiling = {"x": [2]}
    compile_call = {"compile": lambda: nt.compile(relu_graph(), comm=nt.SimulatedWorld(1),
                                                  tiling=tiling),
                    "compile_async": lambda: nt.compile_async(
                        relu_graph(), comm=nt.SimulatedWorld(1), tiling=tiling).result(),
                    "build_plan": lambda: build_plan(relu_graph(), 1, tiling)}[call]
    with pytest.raises(TypeError, match=f"{call}: tiling must be a TilingStrategy or None .*"
                                        r"TilingStrategy.manual.*got \{'x': \[2\]\}"):
        compile_call()


@pytest.mark.parametrize("comm", ["world", 3])
def test_a_comm_that_is_no_communicator_is_named(comm):
    """Before: AttributeError: 'str' object has no attribute 'Get_size'."""
    with pytest.raises(TypeError, match=f"comm must be an MPI communicator .*got {comm!r}"):
        nt.compile(relu_graph(), comm=comm)
