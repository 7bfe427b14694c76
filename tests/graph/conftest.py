"""Fixtures shared by the graph-layer tests."""

import pytest

from nntile_spmd import LogicalGraph, ops


@pytest.fixture
def mlp():
    """A two-layer MLP whose counts are worked out by hand in test_graph_analysis.py."""
    g = LogicalGraph("mlp")
    x = g.tensor([784, 64], "x", external=True)                            # (in, batch)
    w1 = g.tensor([256, 784], "w1", requires_grad=True, persistent=True)
    b1 = g.tensor([256], "b1", requires_grad=True, persistent=True)
    w2 = g.tensor([10, 256], "w2", requires_grad=True, persistent=True)
    h = ops.gemm(w1, x, "h")                                               # (256, 64)
    h_biased = ops.add_fiber(1.0, b1, 1.0, h, "h_biased", axis=0)
    activation = ops.gelu(h_biased, "a")
    ops.gemm(w2, activation, "y").mark_output(True)                        # (10, 64)
    return g
