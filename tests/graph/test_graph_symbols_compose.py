"""Symbolic dims and bind(), clone() independence, and embed() of a repeated block."""

import pytest

from nntile_spmd import LogicalGraph, ops


def symbolic_graph():
    """x is [64, seq] (features, tokens): a linear layer and gelu keep the seq dim."""
    g = LogicalGraph("sym")
    x = g.tensor([64, "seq"], "x", external=True)
    w = g.tensor([32, 64], "w", requires_grad=True, persistent=True)
    h = ops.gemm(w, x, "h")
    ops.gelu(h, "y").mark_output(True)
    ops.sum_fiber(h, "h_sum", axis=0)
    return g


def test_symbolic_shapes_flow_through_rules():
    g = symbolic_graph()
    assert g.get_tensor("h").shape == (32, "seq")
    assert g.get_tensor("y").is_symbolic
    assert g.get_tensor("h_sum").shape == (32,)
    assert g.symbols() == {"seq"}


def test_bind_gives_concrete_copy_and_keeps_original():
    g = symbolic_graph()
    bound = g.bind({"seq": 128})
    assert bound.get_tensor("x").shape == (64, 128)
    assert bound.get_tensor("y").shape == (32, 128)
    assert bound.symbols() == set()
    assert bound.get_tensor("y").is_output and bound.get_tensor("x").external
    assert [op.name for op in bound.ops()] == [op.name for op in g.ops()]
    assert g.get_tensor("y").shape == (32, "seq")
    assert g.symbols() == {"seq"}


def test_partial_bind_keeps_other_symbols():
    g = LogicalGraph("two")
    x = g.tensor(["d", "seq"], "x")
    ops.relu(x, "y")
    bound = g.bind({"d": 8})
    assert bound.get_tensor("y").shape == (8, "seq")
    assert bound.symbols() == {"seq"}


BAD_BINDINGS = [
    {"seq": 0},
    {"seq": -4},
    {"seq": 1.5},
    {"seq": "128"},
    {"seq": None},
    {"seq": True},
]


@pytest.mark.parametrize("bindings", BAD_BINDINGS)
def test_bad_bindings_raise(bindings):
    with pytest.raises(ValueError, match="seq|True"):
        symbolic_graph().bind(bindings)


SYMBOL_MISMATCH_CASES = [  # op named in the error, builder(a, b) comparing a's dims with b's
    ("add", lambda a, b: ops.add(1.0, a, 1.0, b, "z")),
    ("multiply", lambda a, b: ops.multiply(a, b, "z")),
    ("gemm", lambda a, b: ops.gemm(a, b, "z", trans_a=True)),
    ("mse_loss", lambda a, b: ops.mse_loss(a, b, "z")),
]


@pytest.mark.parametrize("op_type, build", SYMBOL_MISMATCH_CASES,
                         ids=[case[0] for case in SYMBOL_MISMATCH_CASES])
def test_rule_comparing_different_symbols_raises(op_type, build):
    g = LogicalGraph("g")
    a, b = g.tensor(["seq", 4], "a"), g.tensor(["len", 4], "b")
    with pytest.raises(ValueError, match=f"{op_type}:.*seq.*len"):
        build(a, b)


def test_same_symbol_matches_and_symbol_never_equals_a_size():
    g = LogicalGraph("g")
    a, b, c = g.tensor(["seq", 4], "a"), g.tensor(["seq", 4], "b"), g.tensor([128, 4], "c")
    assert ops.add(1.0, a, 1.0, b, "z").shape == ("seq", 4)
    with pytest.raises(ValueError, match="shapes differ"):
        ops.add(1.0, a, 1.0, c, "w")


def test_clone_is_independent(mlp):
    copy = mlp.clone("copy")
    assert copy.name == "copy" and mlp.name == "mlp"
    assert copy.to_json() | {"name": "mlp"} == mlp.to_json()
    for original, cloned in zip(mlp.tensors(), copy.tensors()):
        assert cloned is not original and cloned.graph is copy
    assert all(cloned is not op for cloned, op in zip(copy.ops(), mlp.ops()))
    ops.relu(copy.get_tensor("y"), "extra")
    copy.get_tensor("a").mark_output(True)
    copy.get_tensor("x").mark_input(False)
    assert mlp.num_operations() == 4 and not mlp.has_tensor("extra")
    assert not mlp.get_tensor("a").is_output and mlp.get_tensor("x").is_input


def block():
    """One layer: y = gelu(w @ x + b) on x [16, 8] (features, batch)."""
    g = LogicalGraph("block")
    x = g.tensor([16, 8], "x", external=True)
    w = g.tensor([16, 16], "w", requires_grad=True, persistent=True)
    b = g.tensor([16], "b", requires_grad=True, persistent=True)
    h = ops.add_fiber(1.0, b, 1.0, ops.gemm(w, x, "wx"), "h", axis=0)
    ops.gelu(h, "y")
    return g


def test_embed_stacks_twelve_blocks_with_separate_parameters():
    layer, g = block(), LogicalGraph("stack")
    current = first = g.tensor([16, 8], "input", external=True)
    mappings = []
    for index in range(12):
        mappings.append(g.embed(layer, {"x": current}, prefix=f"layer{index}."))
        current = mappings[-1]["y"]
    weights = [mapping["w"] for mapping in mappings]
    assert [w.name for w in weights] == [f"layer{i}.w" for i in range(12)]
    assert len({id(w) for w in weights}) == 12
    assert all(w.graph is g and w.role == "parameter" for w in weights)
    assert g.num_parameters() == 12 * (16 * 16 + 16)
    assert g.num_operations() == 12 * 3
    assert not any(g.has_tensor(f"layer{i}.x") for i in range(12))
    # Layer i's gemm reads layer i-1's output: the copies are chained.
    gemms = [op for op in g.ops() if op.op_type == "gemm"]
    assert gemms[0].inputs[1] is first
    for index in range(1, 12):
        assert gemms[index].inputs[1] is mappings[index - 1]["y"]
        assert gemms[index].name == f"layer{index}.gemm_0"
    assert layer.num_operations() == 3 and len(layer.tensors()) == 6


def test_embed_rejects_bad_bindings():
    layer, g = block(), LogicalGraph("stack")
    wrong_shape = g.tensor([16, 9], "wrong")
    with pytest.raises(ValueError, match=r"wrong\[16, 9\].*x\[16, 8\]"):
        g.embed(layer, {"x": wrong_shape}, prefix="l0.")
    with pytest.raises(KeyError, match="nope"):
        g.embed(layer, {"nope": wrong_shape}, prefix="l0.")
    with pytest.raises(ValueError, match="belongs to graph|cannot stand for"):
        g.embed(layer, {"x": LogicalGraph("other").tensor([16, 8], "x")}, prefix="l0.")
