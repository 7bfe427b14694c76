"""Analysis numbers of a small MLP worked out by hand, dead-op detection, summary()."""

import pytest

from nntile_spmd import LogicalGraph, ops

# The conftest MLP: x [784, 64] -> h = w1 x [256, 64] -> h_biased = h + b1 -> a = gelu
# -> y = w2 a [10, 64]. Costs follow the registry: gemm 2*M*N*K, add_fiber 3 per
# element, gelu 8 per element.
MLP_PARAMETERS = 256 * 784 + 256 + 10 * 256
MLP_FLOPS = 2 * 256 * 64 * 784 + 3 * 256 * 64 + 8 * 256 * 64 + 2 * 10 * 64 * 256
MLP_ACTIVATION_BYTES = 4 * (3 * 256 * 64 + 10 * 64)   # h, h_biased, a, y in fp32


def test_mlp_numbers(mlp):
    assert mlp.num_operations() == 4
    assert mlp.num_parameters() == MLP_PARAMETERS == 203_520
    assert mlp.estimate_parameter_memory() == 4 * MLP_PARAMETERS
    assert mlp.estimate_flops() == MLP_FLOPS == 26_198_016
    assert mlp.estimate_activation_memory() == MLP_ACTIVATION_BYTES == 199_168
    assert mlp.dead_ops() == []


def test_activation_memory_counts_each_tensor_once_and_skips_kept_ones(mlp):
    y = mlp.get_tensor("y")
    ops.gelu_inplace(y)                        # y written again: still counted once
    ops.scale_inplace(mlp.get_tensor("w1"))    # persistent: not an activation
    ops.cast(mlp.get_tensor("x"), "fp64", "x64")   # new fp64 activation, 8 bytes each
    assert mlp.estimate_activation_memory() == MLP_ACTIVATION_BYTES + 8 * 784 * 64


def test_parameters_exclude_other_roles():
    g = LogicalGraph("roles")
    g.tensor([5], "frozen", persistent=True)                              # state
    g.tensor([5], "grad_free", requires_grad=True)                        # buffer
    g.tensor([5], "const", persistent=True, external=True)                # constant
    g.tensor([5], "p", dtype="fp64", requires_grad=True, persistent=True)
    assert g.num_parameters() == 5
    assert g.estimate_parameter_memory() == 40


def test_symbolic_graph_estimates_need_bind():
    g = LogicalGraph("sym")
    x = g.tensor([64, "seq"], "x", external=True)
    w = g.tensor([32, 64], "w", requires_grad=True, persistent=True)
    ops.gemm(w, x, "h").mark_output(True)
    assert g.num_parameters() == 32 * 64
    with pytest.raises(ValueError, match="gemm_0: .*symbolic.*bind"):
        g.estimate_flops()
    with pytest.raises(ValueError, match="h has symbolic shape"):
        g.estimate_activation_memory()
    assert "bind them" in g.summary()
    assert g.bind({"seq": 10}).estimate_flops() == 2 * 32 * 10 * 64


def chain(g):
    """x (external) -> y = relu(x); returns x, y with y not yet marked."""
    x = g.tensor([4, 3], "x", external=True)
    return x, ops.relu(x, "y")


def dead_unused_branch(g):
    x, y = chain(g)
    y.mark_output(True)
    ops.scale(ops.gelu(x, "g"), "s")          # gelu_1 feeds only scale_2: both dead


def dead_unmarked_output(g):
    chain(g)                                  # relu_0 reaches nothing kept


def live_parameter_update(g):
    x, y = chain(g)
    w = g.tensor([4, 3], "w", requires_grad=True, persistent=True)
    with g.phase("optimizer"):
        ops.add_inplace(-0.1, y, 1.0, w)      # updates kept state: relu_0 and this live


def dead_overwritten(g):
    t = g.tensor([4], "t")
    t.mark_output(True)
    ops.fill(t, 1.0)                          # fill_0 is overwritten before any read
    ops.fill(t, 2.0)


def live_accumulation(g):
    x, y = chain(g)
    total = g.tensor([], "total").mark_output(True)
    ops.clear(total)                          # clear_1 is read by the accumulating sum
    ops.sum(y, total, beta=1.0)


def dead_after_last_write(g):
    x, y = chain(g)
    y.mark_output(True)
    ops.relu_inplace(x)                       # x is an input, not output: dead


def live_inplace_chain(g):
    x, y = chain(g)
    y.mark_output(True)
    ops.gelu_inplace(y)                       # reads and rewrites y: both ops live


def dead_overwritten_output(g):
    x, y = chain(g)
    y.mark_output(True)
    ops.copy(x, y)                            # overwrites y: relu_0 is dead now


DEAD_CASES = [  # builder, names of the dead ops
    (dead_unused_branch, ["gelu_1", "scale_2"]),
    (dead_unmarked_output, ["relu_0"]),
    (live_parameter_update, []),
    (dead_overwritten, ["fill_0"]),
    (live_accumulation, []),
    (dead_after_last_write, ["relu_inplace_1"]),
    (live_inplace_chain, []),
    (dead_overwritten_output, ["relu_0"]),
]


@pytest.mark.parametrize("build, dead", DEAD_CASES, ids=[case[0].__name__ for case in DEAD_CASES])
def test_dead_ops(build, dead):
    g = LogicalGraph(build.__name__)
    build(g)
    assert [op.name for op in g.dead_ops()] == dead


def test_summary_reports_counts_and_estimates(mlp):
    ops.relu(mlp.get_tensor("y"), "unused")
    text = mlp.summary()
    for fragment in ["'mlp'", "9 tensors, 5 ops", "forward 5", "gemm 2", "parameter 3",
                     f"{MLP_PARAMETERS:,} elements", f"{4 * MLP_PARAMETERS:,} bytes",
                     f"{MLP_FLOPS + 10 * 64:,}",             # + relu, 1 FLOP per element
                     f"{MLP_ACTIVATION_BYTES + 4 * 10 * 64:,} bytes", "dead ops: relu_4"]:
        assert fragment in text, f"{fragment!r} not in\n{text}"
