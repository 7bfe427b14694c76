"""Build-time checks of the slice, attention and cross-entropy ops: every mistake
raises when the op is added (a composite: before its first op), naming the op and its
tensors (registry.op_error)."""

import pytest

from nntile_spmd import LogicalGraph, ops


def operands():
    g = LogicalGraph("slices")
    specs = {"x": ([3, 4, 5], "fp32"), "y": ([3, 4, 5], "fp32"), "y64": ([3, 4, 5], "fp64"),
             "yt": ([5, 4, 3], "fp32"), "s": ([3, 5], "fp32"), "s_bad": ([3, 4], "fp32"),
             "i": ([3, 4, 5], "int64"), "s64": ([3, 5], "fp64"), "mask": ([3, 4], "bool"),
             "mask_f": ([3, 4], "fp32"), "q": ([4, 5, 2], "fp32"), "k": ([4, 6, 2], "fp32"),
             "v": ([3, 6, 2], "fp32"), "k3": ([3, 6, 2], "fp32"), "v5": ([3, 5, 2], "fp32"),
             "kb": ([4, 6, 3], "fp32"), "k64": ([4, 6, 2], "fp64"), "causal": ([6, 5], "bool"),
             "causal_t": ([5, 6], "bool"), "q1": ([4], "fp32"), "logits": ([10, 6, 2], "fp32"),
             "labels": ([6, 2], "int64"), "labels_t": ([2, 6], "int64"),
             "labels_f": ([6, 2], "fp32"), "lse": ([6, 2], "fp32"), "lse_t": ([2, 6], "fp32"),
             "count": ([], "fp32"), "count64": ([], "fp64"), "count1": ([1], "fp32")}
    return {name: g.tensor(shape, name, dtype) for name, (shape, dtype) in specs.items()}


SDPA_NAME = "scaled_dot_product_attention"


def SDPA(*args, **kwargs):  # noqa: N802 - short alias for the table
    return ops.scaled_dot_product_attention(*args, **kwargs)


CE_LSE = ops.cross_entropy_lse

# id, mistake(t), error class, fragments the message must contain
ERROR_CASES = [
    ("sumprod_slice_shapes", lambda t: ops.sumprod_slice(t["x"], t["yt"], "z", axis=1),
     ValueError, ["sumprod_slice:", "yt must have the shape of x", "x[3, 4, 5]", "yt[5, 4, 3]"]),
    ("sumprod_slice_dtypes", lambda t: ops.sumprod_slice(t["x"], t["y64"], "z", axis=1),
     TypeError, ["sumprod_slice:", "no implicit casts", "y64[3, 4, 5]:fp64"]),
    ("sumprod_slice_int", lambda t: ops.sumprod_slice(t["i"], t["i"], "z", axis=1),
     TypeError, ["sumprod_slice:", "floating-point", "i[3, 4, 5]:int64"]),
    ("sumprod_slice_axis", lambda t: ops.sumprod_slice(t["x"], t["y"], "z", axis=3),
     ValueError, ["sumprod_slice:", "axis=3", "x[3, 4, 5]"]),
    ("sumprod_slice_beta_new", lambda t: ops.sumprod_slice(t["x"], t["y"], "z", beta=1.0),
     ValueError, ["sumprod_slice:", "beta=1.0", "'z'"]),
    ("sumprod_slice_into_wrong", lambda t: ops.sumprod_slice(t["x"], t["y"], t["s"], axis=2,
                                                             beta=1.0),
     ValueError, ["sumprod_slice:", "output s must be [3, 4]:fp32"]),
    ("sumprod_slice_backward_slice", lambda t: ops.sumprod_slice_backward(t["s_bad"], t["x"],
                                                                          t["y"], axis=1),
     ValueError, ["sumprod_slice_backward:", "s_bad must have shape [3, 5]", "x[3, 4, 5]"]),
    ("logsumexp_negative_beta", lambda t: ops.logsumexp(t["x"], t["s"], axis=1, beta=-1.0),
     ValueError, ["logsumexp:", "beta=-1.0 must be >= 0", "x[3, 4, 5]"]),
    ("logsumexp_into_wrong_dtype", lambda t: ops.logsumexp(t["x"], t["s64"], axis=1, beta=1.0),
     TypeError, ["logsumexp:", "output s64 must be [3, 5]:fp32"]),
    ("logsumexp_int", lambda t: ops.logsumexp(t["i"], "y", axis=1), TypeError,
     ["logsumexp:", "floating-point", "i[3, 4, 5]:int64"]),
    ("logsumexp_backward_slice", lambda t: ops.logsumexp_backward(t["x"], t["s_bad"], t["s"],
                                                                  t["y"], axis=1),
     ValueError, ["logsumexp_backward:", "s_bad must have shape [3, 5]", "x[3, 4, 5]"]),
    ("mask_scalar_shape", lambda t: ops.mask_scalar(t["mask"], 0.0, t["x"]), ValueError,
     ["mask_scalar:", "mask must have shape [3, 4, 5]", "mask[3, 4]:bool", "x[3, 4, 5]"]),
    ("mask_scalar_dtype", lambda t: ops.mask_scalar(t["mask_f"], 0.0, t["x"], batch_ndim=1),
     TypeError, ["mask_scalar:", "mask_f must be a bool tensor", "mask_f[3, 4]:fp32"]),
    ("mask_scalar_batch_ndim", lambda t: ops.mask_scalar(t["mask"], 0.0, t["x"], batch_ndim=4),
     ValueError, ["mask_scalar:", "batch_ndim=4", "x[3, 4, 5]"]),
    ("mask_scalar_int", lambda t: ops.mask_scalar(t["mask"], 0.0, t["i"], batch_ndim=1),
     TypeError, ["mask_scalar:", "floating-point", "i[3, 4, 5]:int64"]),
    ("softmax_from_logsumexp_lse", lambda t: ops.softmax_from_logsumexp(t["s_bad"], t["x"], "p",
                                                                      axis=1),
     ValueError, ["softmax_from_logsumexp:", "s_bad must have shape [3, 5]", "x[3, 4, 5]"]),
    ("softmax_from_logsumexp_dtype", lambda t: ops.softmax_from_logsumexp(t["s64"], t["x"], "p",
                                                                        axis=1),
     TypeError, ["softmax_from_logsumexp:", "no implicit casts", "s64[3, 5]:fp64"]),
    ("softmax_from_logsumexp_backward_dy", lambda t: ops.softmax_from_logsumexp_backward(
        t["x"], t["yt"], t["s"], t["y"], axis=1),
     ValueError, ["softmax_from_logsumexp_backward:", "yt must have the shape of x"]),
    ("sdpa_head_dim", lambda t: SDPA(t["q"], t["k3"], t["v"], "o"), ValueError,
     [f"{SDPA_NAME}:", "q and k3 must have the same head_dim", "q[4, 5, 2]", "k3[3, 6, 2]"]),
    ("sdpa_key_length", lambda t: SDPA(t["q"], t["k"], t["v5"], "o"), ValueError,
     [f"{SDPA_NAME}:", "k and v5 must have the same key length", "v5[3, 5, 2]"]),
    ("sdpa_batch", lambda t: SDPA(t["q"], t["kb"], t["v"], "o"), ValueError,
     [f"{SDPA_NAME}:", "same batch dims", "kb[4, 6, 3]"]),
    ("sdpa_dtypes", lambda t: SDPA(t["q"], t["k64"], t["v"], "o"), TypeError,
     [f"{SDPA_NAME}:", "no implicit casts", "k64[4, 6, 2]:fp64"]),
    ("sdpa_ndim", lambda t: SDPA(t["q1"], t["k"], t["v"], "o"), ValueError,
     [f"{SDPA_NAME}:", "[head_dim, T, batch...]", "q1[4]"]),
    ("sdpa_mask_shape", lambda t: SDPA(t["q"], t["k"], t["v"], "o", mask=t["causal_t"]),
     ValueError, [f"{SDPA_NAME}:", "mask causal_t must be [Tk, Tq] = [6, 5]",
                  "causal_t[5, 6]"]),
    ("sdpa_mask_dtype", lambda t: SDPA(t["q"], t["k"], t["v"], "o", mask=t["mask_f"]),
     TypeError, [f"{SDPA_NAME}:", "mask mask_f must be a bool tensor"]),
    ("cross_entropy_labels_shape", lambda t: ops.cross_entropy(t["logits"], t["labels_t"], "l"),
     ValueError, ["cross_entropy:", "labels_t must have the shape of logits without its class "
                  "axis 0", "logits[10, 6, 2]", "labels_t[2, 6]"]),
    ("cross_entropy_float_labels", lambda t: ops.cross_entropy(t["logits"], t["labels_f"], "l"),
     TypeError, ["cross_entropy:", "int64/int32", "labels_f[6, 2]:fp32"]),
    ("cross_entropy_int_logits", lambda t: ops.cross_entropy(t["labels"], t["labels"], "l"),
     TypeError, ["cross_entropy:", "floating-point", "labels[6, 2]:int64"]),
    ("cross_entropy_ignore_index", lambda t: ops.cross_entropy(t["logits"], t["labels"], "l",
                                                               ignore_index=-1.5),
     TypeError, ["cross_entropy:", "ignore_index=-1.5 must be an int", "labels[6, 2]"]),
    ("valid_count_dtype", lambda t: ops.valid_count(t["labels"], "n", dtype="int64"), TypeError,
     ["valid_count:", "dtype='int64' must be a floating-point dtype"]),
    ("cross_entropy_lse_lse", lambda t: CE_LSE(t["logits"], t["lse_t"], t["labels"], t["count"],
                                               "l"),
     ValueError, ["cross_entropy_lse:", "lse_t must have the shape of logits without its class",
                  "lse_t[2, 6]"]),
    ("cross_entropy_lse_count", lambda t: CE_LSE(t["logits"], t["lse"], t["labels"], t["count1"],
                                                 "l"),
     ValueError, ["cross_entropy_lse:", "count1 must be 0-d", "count1[1]"]),
    ("cross_entropy_lse_dtypes", lambda t: CE_LSE(t["logits"], t["lse"], t["labels"],
                                                  t["count64"], "l"),
     TypeError, ["cross_entropy_lse:", "no implicit casts", "count64[]:fp64"]),
]


def test_sdpa_names_derive_from_name():
    t = operands()
    out = SDPA(t["q"], t["k"], t["v"], "ctx", mask=t["causal"])
    graph = out.graph
    assert [op.op_type for op in graph.ops()] == ["gemm", "mask_scalar", "logsumexp",
                                                  "softmax_from_logsumexp", "gemm"]
    assert [graph.get_tensor(n).shape for n in ("ctx_scores", "ctx_lse", "ctx_probs", "ctx")] \
        == [(6, 5, 2), (5, 2), (6, 5, 2), (3, 5, 2)]
    assert graph.ops()[0].attrs["alpha"] == pytest.approx(0.5)   # 1/sqrt(head_dim 4)


@pytest.mark.parametrize("case_id, mistake, error, fragments", ERROR_CASES,
                         ids=[case[0] for case in ERROR_CASES])
def test_mistake_raises_naming_op_and_tensors(case_id, mistake, error, fragments):
    with pytest.raises(error) as caught:
        mistake(operands())
    for fragment in fragments:
        assert fragment in str(caught.value), f"{case_id}: {fragment!r} not in {caught.value}"


@pytest.mark.parametrize("case_id", [case[0] for case in ERROR_CASES
                                     if case[0].startswith(("sdpa", "cross_entropy_"))
                                     and "lse" not in case[0]])
def test_composite_mistake_adds_nothing(case_id):
    """The composites check everything before adding their first op."""
    mistake = {case[0]: case[1] for case in ERROR_CASES}[case_id]
    t = operands()
    graph = t["x"].graph
    tensors_before = len(graph.tensors())
    with pytest.raises((ValueError, TypeError)):
        mistake(t)
    assert graph.num_operations() == 0 and len(graph.tensors()) == tensors_before


def test_cross_entropy_emits_three_ops_named_after_it():
    t = operands()
    loss = ops.cross_entropy(t["logits"], t["labels"], "loss")
    graph = loss.graph
    assert [op.op_type for op in graph.ops()] == ["logsumexp", "valid_count",
                                                  "cross_entropy_lse"]
    assert graph.get_tensor("loss_count").dtype == "fp32" and loss.shape == ()
    assert graph.get_tensor("loss_lse").shape == (6, 2)
