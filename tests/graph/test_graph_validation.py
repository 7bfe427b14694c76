"""Every user mistake raises when the op is added, naming the op and its tensors.

ValueError for shapes, names and ranges; TypeError for dtypes, attributes and operands.
"""

from types import SimpleNamespace

import numpy as np
import pytest

from nntile_spmd import LogicalGraph, ops
from nntile_spmd.graph.registry import REQUIRED, OpSpec


def fresh():
    """A graph with the operands the cases below misuse, and a second graph."""
    g = LogicalGraph("main")
    specs = {"x": ([3, 4], "fp32"), "x2": ([3, 4], "fp32"), "y": ([4, 3], "fp32"),
             "z": ([3, 4], "fp64"), "i": ([3, 4], "int64"), "x345": ([3, 4, 5], "fp32"),
             "a": ([4, 5], "fp32"), "b": ([6, 3], "fp32"), "b2": ([5, 3], "fp32"),
             "a3": ([2, 5, 4], "fp32"), "b3": ([5, 3, 6], "fp32"), "w64": ([4, 2], "fp64"),
             "fiber": ([5], "fp32"), "idx": ([6], "int64"), "idx_f": ([6], "fp32"),
             "vocab": ([8, 10], "fp32"), "vocab_i": ([8, 10], "int32"),
             "logits": ([10, 6], "fp32"), "labels5": ([5], "int64"), "labels_f": ([6], "fp32"),
             "step": ([], "int64"), "step_f": ([], "fp32"), "p": ([3, 4], "fp32"),
             "m": ([3, 4], "fp32"), "v": ([3, 4], "fp32"), "sq": ([4, 4], "fp32"),
             "sq2": ([4, 4], "fp32")}
    tensors = {name: g.tensor(shape, name, dtype) for name, (shape, dtype) in specs.items()}
    tensors["ox"] = LogicalGraph("other").tensor([3, 4], "ox")
    return g, SimpleNamespace(**tensors)


def duplicate_op(g, t):
    g.add_op("gelu", [t.x], [t.x2], name="act")
    g.add_op("relu", [t.x], [t.p], name="act")


# id, mistake(g, t), error class, fragments the message must contain
ERROR_CASES = [
    ("add_shapes", lambda g, t: ops.add(1.0, t.x, 1.0, t.y, "s"), ValueError,
     ["add:", "shapes differ", "x[3, 4]:fp32", "y[4, 3]:fp32"]),
    ("multiply_shapes", lambda g, t: ops.multiply(t.x, t.y, "s"), ValueError,
     ["multiply:", "x[3, 4]", "y[4, 3]"]),
    ("mse_shapes", lambda g, t: ops.mse_loss(t.x, t.y, "l"), ValueError,
     ["mse_loss:", "x[3, 4]", "y[4, 3]"]),
    ("gemm_contracted", lambda g, t: ops.gemm(t.a, t.b, "c"), ValueError,
     ["gemm:", "contracted dims differ", "a[4, 5]", "b[6, 3]"]),
    ("gemm_batch", lambda g, t: ops.gemm(t.a3, t.b3, "c", batch_ndim=1), ValueError,
     ["gemm:", "batch dims differ", "a3[2, 5, 4]", "b3[5, 3, 6]"]),
    ("gemm_too_few_dims", lambda g, t: ops.gemm(t.x, t.x2, "c", ndim=2, batch_ndim=1),
     ValueError, ["gemm:", "fewer than", "x[3, 4]"]),
    ("add_fiber_shape", lambda g, t: ops.add_fiber(1.0, t.fiber, 1.0, t.x, "s"), ValueError,
     ["add_fiber:", "must have shape [3]", "fiber[5]", "x[3, 4]"]),
    ("cross_entropy_labels", lambda g, t: ops.cross_entropy_loss(t.logits, t.labels5, "l"),
     ValueError, ["cross_entropy_loss:", "logits[10, 6]", "labels5[5]"]),
    ("output_wrong_shape", lambda g, t: g.add_op("gelu", [t.x], [t.y]), ValueError,
     ["gelu:", "output y must be [3, 4]:fp32"]),
    ("add_dtypes", lambda g, t: ops.add(1.0, t.x, 1.0, t.z, "s"), TypeError,
     ["add:", "no implicit casts", "x[3, 4]:fp32", "z[3, 4]:fp64"]),
    ("gemm_dtypes", lambda g, t: ops.gemm(t.x, t.w64, "c"), TypeError,
     ["gemm:", "x[3, 4]:fp32", "w64[4, 2]:fp64"]),
    ("output_wrong_dtype", lambda g, t: g.add_op("gelu", [t.x], [t.z]), TypeError,
     ["gelu:", "output z must be [3, 4]:fp32"]),
    ("gelu_int", lambda g, t: ops.gelu(t.i, "s"), TypeError,
     ["gelu:", "floating-point", "i[3, 4]:int64"]),
    ("sum_int", lambda g, t: ops.sum(t.i, "s"), TypeError, ["sum:", "i[3, 4]:int64"]),
    ("gemm_int", lambda g, t: ops.gemm(t.i, t.y, "c"), TypeError, ["gemm:", "i[3, 4]:int64"]),
    ("embedding_float_index", lambda g, t: ops.embedding(t.idx_f, t.vocab, "e"), TypeError,
     ["embedding:", "int64/int32", "idx_f[6]:fp32"]),
    ("embedding_int_vocab", lambda g, t: ops.embedding(t.idx, t.vocab_i, "e"), TypeError,
     ["embedding:", "floating-point", "vocab_i[8, 10]:int32"]),
    ("cross_entropy_float_labels", lambda g, t: ops.cross_entropy_loss(t.logits, t.labels_f,
                                                                       "l"),
     TypeError, ["cross_entropy_loss:", "labels_f[6]:fp32"]),
    ("optimizer_step_dtype", lambda g, t: ops.sgd_step(t.step_f, t.x, t.p, t.v), TypeError,
     ["sgd_step:", "step counter", "step_f[]:fp32"]),
    ("cast_unknown_dtype", lambda g, t: ops.cast(t.x, "float32", "s"), TypeError,
     ["cast:", "'float32'", "x[3, 4]"]),
    ("other_graph", lambda g, t: ops.add(1.0, t.x, 1.0, t.ox, "s"), ValueError,
     ["add:", "ox", "'other'", "'main'"]),
    ("other_graph_output", lambda g, t: g.add_op("gelu", [t.x], [t.ox]), ValueError,
     ["gelu:", "ox", "'other'"]),
    ("duplicate_tensor", lambda g, t: g.tensor([2], "x"), ValueError,
     ["'x'", "already used", "'main'"]),
    ("duplicate_output_name", lambda g, t: ops.gelu(t.x, "y"), ValueError,
     ["'y'", "already used"]),
    ("duplicate_op", duplicate_op, ValueError, ["'act'", "already used"]),
    ("unknown_attr", lambda g, t: g.add_op("gelu", [t.x], [t.x2], {"alpha": 2.0}), TypeError,
     ["gelu:", "unknown attribute", "alpha"]),
    ("unknown_attr_gemm", lambda g, t: g.add_op("gemm", [t.a, t.b2], [t.x2],
                                                {"transa": True}),
     TypeError, ["gemm:", "transa", "trans_a"]),
    ("unknown_op_type", lambda g, t: g.add_op("matmul", [t.x, t.y], [t.x2]), ValueError,
     ["'matmul'"]),
    ("softmax_axis", lambda g, t: ops.softmax(t.x, "s", axis=2), ValueError,
     ["softmax:", "axis=2", "x[3, 4]"]),
    ("softmax_negative_axis", lambda g, t: ops.softmax(t.x, "s", axis=-1), ValueError,
     ["softmax:", "axis=-1", "x[3, 4]"]),
    ("logsumexp_axis", lambda g, t: ops.logsumexp(t.x345, "s", axis=3), ValueError,
     ["logsumexp:", "axis=3", "x345[3, 4, 5]"]),
    ("sum_fiber_axis", lambda g, t: ops.sum_fiber(t.x345, "s", axis=2, batch_ndim=1),
     ValueError, ["sum_fiber:", "axis=2", "x345[3, 4, 5]"]),
    ("sum_fiber_batch_ndim", lambda g, t: ops.sum_fiber(t.x345, "s", axis=0, batch_ndim=3),
     ValueError, ["sum_fiber:", "batch_ndim=3", "x345[3, 4, 5]"]),
    ("add_fiber_axis", lambda g, t: ops.add_fiber(1.0, t.fiber, 1.0, t.x345, "s", axis=3),
     ValueError, ["add_fiber:", "axis=3", "x345[3, 4, 5]"]),
    ("embedding_axis", lambda g, t: ops.embedding(t.idx, t.vocab, "e", axis=2), ValueError,
     ["embedding:", "axis=2", "idx[6]"]),
    ("transpose_ndim", lambda g, t: ops.transpose(t.x, "s", ndim=3), ValueError,
     ["transpose:", "ndim=3", "x[3, 4]"]),
    ("permute_not_a_permutation", lambda g, t: ops.permute(t.x345, "s", (0, 0, 2)),
     ValueError, ["permute:", "perm=(0, 0, 2) is not a permutation", "x345[3, 4, 5]"]),
    ("permute_wrong_length", lambda g, t: ops.permute(t.x, "s", [1, 0, 2]), ValueError,
     ["permute:", "of the 2 dims", "x[3, 4]"]),
    ("gemm_beta_new_name", lambda g, t: ops.gemm(t.a, t.b2, "c", beta=1.0), ValueError,
     ["gemm:", "beta=1.0", "'c'", "a[4, 5]", "b2[5, 3]"]),
    ("too_few_inputs", lambda g, t: g.add_op("add", [t.x], [t.x2]), TypeError,
     ["add:", "takes 2 input(s)", "got 1"]),
    ("too_many_outputs", lambda g, t: g.add_op("gelu", [t.x], [t.x2, t.p]), TypeError,
     ["gelu:", "1 output(s)"]),
    ("too_few_outputs", lambda g, t: g.add_op("adam_step", [t.step, t.x], [t.p, t.m]),
     TypeError, ["adam_step:", "3 output(s)"]),
    ("output_given_twice", lambda g, t: g.add_op("adam_step", [t.step, t.x], [t.p, t.p, t.v]),
     ValueError, ["adam_step:", "twice", "p[3, 4]"]),
    ("sgd_output_given_twice", lambda g, t: ops.sgd_step(t.step, t.x, t.p, t.p), ValueError,
     ["sgd_step:", "twice", "p[3, 4]"]),
    ("not_a_tensor", lambda g, t: g.add_op("gelu", [np.zeros((3, 4))], [t.x2]), TypeError,
     ["gelu:", "not a TensorNode"]),
    ("clear_of_a_name", lambda g, t: ops.clear("q"), TypeError, ["clear:", "TensorNode"]),
    ("unknown_phase", lambda g, t: g.add_op("gelu", [t.x], [t.x2], phase="training"),
     ValueError, ["gelu:", "'training'"]),
    # an output that is also an input, outside the in-place forms: wrong results before
    ("gemm_output_is_a", lambda g, t: ops.gemm(t.sq, t.sq2, t.sq, beta=1.0), ValueError,
     ["gemm:", "output sq is also input 0", "write the result into a new tensor",
      "sq[4, 4]:fp32", "sq2[4, 4]:fp32"]),
    ("gemm_output_is_b", lambda g, t: ops.gemm(t.sq, t.sq2, t.sq2), ValueError,
     ["gemm:", "output sq2 is also input 1"]),
    ("gemm_output_is_a_and_b", lambda g, t: ops.gemm(t.sq, t.sq, t.sq, beta=1.0), ValueError,
     ["gemm:", "output sq is also input 0"]),
    ("backward_output_is_dy", lambda g, t: ops.relu_backward(t.x, t.x2, t.x2), ValueError,
     ["relu_backward:", "output x2 is also input 1"]),
    ("copy_onto_itself", lambda g, t: ops.copy(t.x, t.x), ValueError,
     ["copy:", "output x is also input 0"]),
    ("zero_dim", lambda g, t: g.tensor([3, 0], "q"), ValueError, ["0", "[3, 0]"]),
    ("bad_symbol", lambda g, t: g.tensor([3, "not a name"], "q"), ValueError, ["not a name"]),
    ("unknown_dtype", lambda g, t: g.tensor([3], "q", "float32"), TypeError, ["'float32'"]),
]


@pytest.mark.parametrize("case_id, mistake, error, fragments", ERROR_CASES,
                         ids=[case[0] for case in ERROR_CASES])
def test_mistake_raises_naming_op_and_tensors(case_id, mistake, error, fragments):
    g, t = fresh()
    with pytest.raises(error) as info:
        mistake(g, t)
    assert info.type is error
    for fragment in fragments:
        assert fragment in str(info.value), f"{fragment!r} not in {str(info.value)!r}"
    # A rejected op is not added (duplicate_op adds its first op successfully).
    assert g.num_operations() == (1 if case_id == "duplicate_op" else 0)


def test_unknown_phase_context_raises():
    g = LogicalGraph("g")
    with pytest.raises(ValueError, match="'training'"), g.phase("training"):
        pass


def test_missing_required_attribute():
    spec = OpSpec(name="needs_k", kernel="needs_k", num_inputs=1, num_outputs=1,
                  infer=lambda *args: [None], axes=lambda *args: (),
                  attrs={"k": REQUIRED, "alpha": 1.0})
    assert spec.normalize_attrs({"k": 3}) == {"k": 3, "alpha": 1.0}
    with pytest.raises(TypeError, match="needs_k: missing attribute 'k'"):
        spec.normalize_attrs({"alpha": 2.0})


def test_failed_builder_leaves_no_tensor():
    g, t = fresh()
    with pytest.raises(ValueError):
        ops.add(1.0, t.x, 1.0, t.ox, "s")
    assert not g.has_tensor("s")


# the forms that update an input in place by design (OpSpec.in_place) stay accepted
IN_PLACE_FORMS = [
    lambda t: ops.add_inplace(1.0, t.x, 2.0, t.x2),
    lambda t: ops.add_inplace(1.0, t.x2, 2.0, t.x2),      # y = 3y: an elementwise loop
    lambda t: ops.multiply_inplace(t.x2, t.x2),
    lambda t: ops.relu_inplace(t.x2),
    lambda t: ops.scale_inplace(t.x2, 0.5),
    lambda t: ops.add_fiber_inplace(1.0, t.fiber, 1.0, t.x345, axis=2),
    lambda t: ops.mask_causal(-1e9, t.sq),
]


@pytest.mark.parametrize("form", IN_PLACE_FORMS)
def test_in_place_forms_are_accepted(form):
    g, t = fresh()
    form(t)
    assert g.num_operations() == 1
