"""Build-time checks of LayerNorm's primitives (slice and fiber ops, pow): every
mistake raises when the op is added, naming the op and its tensors (registry.op_error)."""

import pytest

import nntile_spmd as nt
from nntile_spmd import LogicalGraph, ops


def operands():
    g = LogicalGraph("norm_ops")
    specs = {"x": ([3, 4, 5], "fp32"), "y": ([3, 4, 5], "fp32"), "y64": ([3, 4, 5], "fp64"),
             "yt": ([5, 4, 3], "fp32"), "s": ([3, 5], "fp32"), "s64": ([3, 5], "fp64"),
             "f": ([4], "fp32"), "f_bad": ([5], "fp32"), "i": ([3, 4, 5], "int64")}
    return {name: g.tensor(shape, name, dtype) for name, (shape, dtype) in specs.items()}


# id, mistake(t), error class, fragments the message must contain
ERROR_CASES = [
    ("sum_slice_axis", lambda t: ops.sum_slice(t["x"], "z", axis=3),
     ValueError, ["sum_slice:", "axis=3 out of range", "x[3, 4, 5]"]),
    ("sum_slice_int", lambda t: ops.sum_slice(t["i"], "z", axis=1),
     TypeError, ["sum_slice:", "floating-point", "i[3, 4, 5]:int64"]),
    ("sum_slice_beta_new", lambda t: ops.sum_slice(t["x"], "z", 1, beta=1.0),
     ValueError, ["sum_slice:", "beta=1.0", "'z'"]),
    ("sum_slice_into_wrong", lambda t: ops.sum_slice(t["x"], t["s"], axis=2, beta=1.0),
     ValueError, ["sum_slice:", "output s must be [3, 4]:fp32"]),
    ("add_slice_shape", lambda t: ops.add_slice(1.0, t["s"], 1.0, t["x"], "z", axis=2),
     ValueError, ["add_slice:", "s must have shape [3, 4]", "x[3, 4, 5]"]),
    ("add_slice_dtype", lambda t: ops.add_slice(1.0, t["s64"], 1.0, t["x"], "z", axis=1),
     TypeError, ["add_slice:", "no implicit casts", "s64[3, 5]:fp64"]),
    ("add_slice_inplace_shape", lambda t: ops.add_slice_inplace(1.0, t["s"], 1.0, t["x"], 0),
     ValueError, ["add_slice_inplace:", "s must have shape [4, 5]"]),
    ("multiply_slice_shape", lambda t: ops.multiply_slice(t["s"], t["yt"], "z", axis=1),
     ValueError, ["multiply_slice:", "s must have shape [5, 3]", "yt[5, 4, 3]"]),
    ("multiply_fiber_shape", lambda t: ops.multiply_fiber(t["f_bad"], t["x"], "z", axis=1),
     ValueError, ["multiply_fiber:", "f_bad must have shape [4]", "x[3, 4, 5]"]),
    ("multiply_fiber_batch", lambda t: ops.multiply_fiber(t["f"], t["x"], "z", 1, 3),
     ValueError, ["multiply_fiber:", "batch_ndim=3 out of range"]),
    ("multiply_fiber_axis_in_batch", lambda t: ops.multiply_fiber(t["f"], t["x"], "z", 2, 1),
     ValueError, ["multiply_fiber:", "axis=2 out of range"]),
    ("sumprod_fiber_shapes", lambda t: ops.sumprod_fiber(t["x"], t["yt"], "z", axis=1),
     ValueError, ["sumprod_fiber:", "yt must have the shape of x", "yt[5, 4, 3]"]),
    ("sumprod_fiber_dtypes", lambda t: ops.sumprod_fiber(t["x"], t["y64"], "z", axis=1),
     TypeError, ["sumprod_fiber:", "no implicit casts", "y64[3, 4, 5]:fp64"]),
    ("sumprod_fiber_into_wrong", lambda t: ops.sumprod_fiber(t["x"], t["y"], t["f_bad"], 1,
                                                             beta=1.0),
     ValueError, ["sumprod_fiber:", "output f_bad must be [4]:fp32"]),
    ("sumprod_fiber_backward_fiber", lambda t: ops.sumprod_fiber_backward(t["f_bad"], t["x"],
                                                                          t["y"], axis=1),
     ValueError, ["sumprod_fiber_backward:", "f_bad must have shape [4]"]),
    ("pow_int", lambda t: ops.pow(t["i"], "z", exp=2.0),
     TypeError, ["pow:", "floating-point", "i[3, 4, 5]:int64"]),
    ("pow_backward_shapes", lambda t: ops.pow_backward(t["x"], t["yt"], t["y"]),
     ValueError, ["pow_backward:", "shapes differ", "yt[5, 4, 3]"]),
    ("pow_unknown_attr", lambda t: ops.apply("pow", [t["x"]], ["z"], exponent=2.0),
     TypeError, ["pow:", "unknown attribute", "exponent"]),
]


@pytest.mark.parametrize("case_id, mistake, error, fragments", ERROR_CASES,
                         ids=[case[0] for case in ERROR_CASES])
def test_mistake_raises_naming_op_and_tensors(case_id, mistake, error, fragments):
    with pytest.raises(error) as caught:
        mistake(operands())
    for fragment in fragments:
        assert fragment in str(caught.value), f"{case_id}: {fragment!r} not in {caught.value}"


def test_grad_refuses_to_differentiate_through_an_accumulating_reduction():
    """sum_slice/sumprod_fiber with beta != 0 on a differentiated output: a clear error."""
    g = LogicalGraph("accumulate")
    x = g.tensor([3, 4], "x", "fp64", requires_grad=True, persistent=True)
    s = ops.sum_slice(x, "s", axis=1)
    ops.sum_slice(x, s, axis=1, beta=1.0)
    loss = ops.mse_loss(s, s, "loss")
    with pytest.raises(NotImplementedError, match="accumulates into s"):
        nt.grad(g, loss, [x])
