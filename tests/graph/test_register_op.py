"""nt.register_op: a user-defined op (squared ReLU, with an attribute and a backward
rule) planned, distributed and differentiated like a built-in op: forward and gradient
against NumPy on 1 and 3 simulated ranks, uneven tiles, every preset; bad registrations
are refused. The op is removed again after each test (the kernel tables are global)."""

import numpy as np
import pytest

import nntile_spmd as nt
from nntile_spmd.seed_api.user_ops import unregister_op


def squared_relu_infer(x, alpha=1.0):
    shape, dtype = x
    return shape, dtype


def squared_relu_kernel(x, y, *, alpha):
    y[...] = alpha * np.maximum(x, 0.0) ** 2


def squared_relu_backward(op, ctx):
    """dx += 2 alpha relu(x) dy."""
    (x,), (y,) = op.inputs, op.outputs
    if ctx.needs(x):
        relu = nt.ops.relu(x, ctx.temp(f"{x.name}_relu"))
        scaled = nt.ops.multiply(relu, ctx.grad(y), ctx.temp(f"{x.name}_dsq"),
                                 alpha=2.0 * op.attrs["alpha"])
        nt.ops.add_inplace(1.0, scaled, 1.0, ctx.grad(x))


@pytest.fixture
def squared_relu():
    builder = nt.register_op(
        "squared_relu", squared_relu_infer,
        kernels={"reference": squared_relu_kernel, "cpu": squared_relu_kernel},
        backward=squared_relu_backward, flops=lambda x, alpha: 3 * np.prod(x))
    yield builder
    unregister_op("squared_relu")


@pytest.mark.parametrize("ranks, preset", [(1, "single"), (3, "fsdp"), (3, "ddp"), (2, "tp")])
def test_user_op_forward_and_gradient(squared_relu, ranks, preset):
    g = nt.LogicalGraph("user")
    x = g.input(nt.TensorSpec([5, 7], "fp64"), "x")
    w = g.parameter(nt.TensorSpec([7, 4], "fp64"), "w")
    y = g.squared_relu(g.matmul(x, w), alpha=0.5)
    g.output(y, "y")
    assert nt.ops.squared_relu is squared_relu and g.estimate_flops() > 3 * 20
    physical = nt.PhysicalGraph(g, comm=nt.SimulatedWorld(ranks))
    physical.set_tiling(nt.TilingStrategy.manual({"x": [3, 4]}))
    physical.set_distribution(preset)
    exe = nt.ExecutableGraph(physical)
    rng = np.random.default_rng(0)
    xv, wv, dy = rng.standard_normal((5, 7)), rng.standard_normal((7, 4)), rng.random((5, 4))
    exe.cg.bind_data("w", wv)
    exe.bind_input("x", xv)
    exe.execute()
    h = xv @ wv
    np.testing.assert_allclose(exe.get_output("y"), 0.5 * np.maximum(h, 0) ** 2, rtol=1e-12)
    exe.bind_output_grad("y", dy)
    exe.backward()
    np.testing.assert_allclose(exe.get_parameter_grad("w"), xv.T @ (np.maximum(h, 0) * dy),
                               rtol=1e-12)


def test_bad_registrations_are_refused(squared_relu):
    def infer(x):
        return x

    def kernel(x, y):
        y[...] = x

    with pytest.raises(ValueError, match="already an op"):
        nt.register_op("squared_relu", infer, {"reference": kernel, "cpu": kernel})
    with pytest.raises(ValueError, match="missing \\['cpu'\\]"):
        nt.register_op("copy_twice", infer, {"reference": kernel})
    with pytest.raises(ValueError, match="no type in the kernels' calling convention"):
        nt.register_op("copy_twice", lambda x, factor=2.0: x, {"reference": kernel, "cpu": kernel})
    with pytest.raises(ValueError, match="keyword-only parameters \\[\\] must be"):
        nt.register_op("copy_twice", lambda x, alpha=2.0: x, {"reference": kernel, "cpu": kernel})
    assert not hasattr(nt.ops, "copy_twice")
