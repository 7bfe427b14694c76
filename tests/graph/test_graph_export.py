"""DOT, Mermaid and JSON export; save()/load() round trips; render() with and without dot."""

import json
import os
import shutil
import stat

import numpy as np
import pytest

from nntile_spmd import LogicalGraph, ops
from nntile_spmd.graph import export


def all_roles():
    """One tensor of every role, each touched by an op."""
    g = LogicalGraph("roles")
    x = g.tensor([4, 3], "x", external=True)                                   # input
    table = g.tensor([4, 3], "table", external=True, persistent=True)         # constant
    w = g.tensor([4, 3], "w", requires_grad=True, persistent=True)            # parameter
    moment = g.tensor([4, 3], "moment", persistent=True)                      # state
    h = ops.multiply(x, table, "h")                                           # buffer
    y = ops.add(1.0, h, 1.0, w, "y").mark_output(True)                        # output
    grad = g.tensor([4, 3], "grad_w")
    grad.grad_of = "w"                                                        # gradient
    with g.phase("backward"):
        ops.copy(y, grad)
    with g.phase("optimizer"):
        ops.add_inplace(1.0, grad, 0.9, moment)
    return g


def symbolic():
    g = LogicalGraph("sym")
    x = g.tensor([64, "seq", "batch"], "x", external=True)
    w = g.tensor([32, 64], "w", requires_grad=True, persistent=True)
    h = ops.gemm(w, x, "h", alpha=0.5)
    ops.softmax(h, "p", axis=0).mark_output(True)
    return g


def phases_and_attrs():
    """Ops in all phases with float, int, bool and string attrs, some given as ints."""
    g = LogicalGraph("train")
    x = g.tensor([8, 4], "x", external=True).mark_output(True)
    w = g.tensor([8, 8], "w", requires_grad=True, persistent=True)
    step = g.tensor([], "step", "int64", persistent=True)
    m, v = (g.tensor([8, 8], name, persistent=True) for name in ("m", "v"))
    y = ops.gemm(w, x, "y", alpha=1, trans_a=True)      # alpha given as an int stays int
    ops.cast(y, "fp64", "y64").mark_output(True)
    ops.fill(x, float("-inf"))
    with g.phase("backward"):
        dw = ops.gemm(y, x, "dw", alpha=1.0, trans_b=True)
        dw.grad_of = "w"
    with g.phase("optimizer"):
        ops.add_scalar(step, 1)
        ops.adamw_step(step, dw, w, m, v, lr=np.float32(0.5), eps=1e-8)
    g.tensor([3], "flagged", external=True).mark_input(False)
    g.tensor([3], "marked").mark_input(True)
    return g


def embedded_blocks():
    block = LogicalGraph("block")
    ops.relu(block.tensor([5], "x", external=True), "y")
    g = LogicalGraph("stack")
    current = g.tensor([5], "in", external=True)
    for index in range(3):
        current = g.embed(block, {"x": current}, f"l{index}/")["y"]
    return g


def empty():
    return LogicalGraph("empty")


def causal_attention():   # block-sparse scores and probabilities (causal_dims)
    g = LogicalGraph("causal")
    q, k, v = (g.tensor([2, 6, 3], name, external=True) for name in "qkv")
    ops.scaled_dot_product_attention(q, k, v, "out", mask="causal")
    return g


ROUND_TRIP_BUILDERS = [all_roles, symbolic, phases_and_attrs, embedded_blocks, empty,
                       causal_attention]


@pytest.mark.parametrize("build", ROUND_TRIP_BUILDERS, ids=lambda build: build.__name__)
def test_save_load_round_trip(build, tmp_path):
    g = build()
    path = tmp_path / "graph.json"
    g.save(path)
    loaded = LogicalGraph.load(path)
    assert loaded.to_json() == g.to_json()
    assert [t.causal_dims for t in loaded.tensors()] == [t.causal_dims for t in g.tensors()]
    assert json.loads(json.dumps(g.to_json())) == g.to_json()
    for original, copy in zip(g.ops(), loaded.ops()):
        assert [type(value) for value in copy.attrs.values()] == \
            [type(export.plain_value(original, key, value))
             for key, value in original.attrs.items()]
    assert sorted(os.listdir(tmp_path)) == ["graph.json"]


def test_round_trip_keeps_number_types(tmp_path):
    g = phases_and_attrs()
    g.save(tmp_path / "g.json")
    loaded = LogicalGraph.load(tmp_path / "g.json")
    gemm, adamw = loaded.get_op("gemm_0"), loaded.get_op("adamw_step_5")
    assert type(gemm.attrs["alpha"]) is int and type(gemm.attrs["beta"]) is float
    assert gemm.attrs["trans_a"] is True and type(gemm.attrs["ndim"]) is int
    assert adamw.attrs["lr"] == 0.5 and type(adamw.attrs["lr"]) is float
    assert loaded.get_op("fill_2").attrs["value"] == float("-inf")
    assert [op.phase for op in loaded.ops()] == ["forward"] * 3 + ["backward"] + \
        ["optimizer"] * 2
    assert loaded.get_tensor("dw").grad_of == "w"
    assert loaded.get_tensor("flagged").is_input is False
    assert loaded.get_tensor("marked").is_input is True


def test_load_validates_ops(tmp_path):
    data = all_roles().to_json()
    data["ops"][0]["outputs"] = ["w"]                   # multiply writing a parameter is fine
    LogicalGraph.from_json(data)
    data["ops"][0]["inputs"] = ["x", "grad_w"]          # still [4, 3]: fine too
    data["tensors"][0]["shape"] = [3, 4]
    data["tensors"][0]["role"] = "input"
    with pytest.raises(ValueError, match=r"multiply: shapes differ.*x\[3, 4\]"):
        LogicalGraph.from_json(data)


BAD_DOCUMENTS = [  # edit applied to a good document, error class, message fragment
    (lambda d: d.update(format="other"), ValueError, "not a nntile_spmd.graph"),
    (lambda d: d.update(version=99), ValueError, "version 99"),
    (lambda d: d["tensors"][0].pop("dtype"), ValueError, "malformed"),
    (lambda d: d["ops"][0].update(inputs=["nope", "table"]), ValueError, "nope"),
    (lambda d: d["tensors"][2].update(role="buffer"), ValueError, "stored role 'buffer'"),
    (lambda d: d["ops"][0]["attrs"].update(gamma=1.0), TypeError, "multiply: unknown"),
    (lambda d: d["ops"][0].update(phase="warmup"), ValueError, "'warmup'"),
    (lambda d: d["tensors"].append(dict(d["tensors"][0])), ValueError, "already used"),
]


@pytest.mark.parametrize("edit, error, fragment", BAD_DOCUMENTS)
def test_load_rejects_bad_documents(edit, error, fragment, tmp_path):
    data = all_roles().to_json()
    edit(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(error, match=fragment):
        LogicalGraph.load(path)


def test_save_is_atomic_and_keeps_mode(tmp_path, monkeypatch):
    path = tmp_path / "g.json"
    path.write_text("old")
    path.chmod(0o640)
    all_roles().save(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    saved = path.read_text()

    def failing_replace(source, target):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError, match="disk full"):
        symbolic().save(path)
    assert path.read_text() == saved
    assert sorted(os.listdir(tmp_path)) == ["g.json"]


def test_unsaveable_attr_names_op(tmp_path):
    g = LogicalGraph("g")
    ops.scale(g.tensor([2], "x"), "y", alpha=[1.0])
    with pytest.raises(TypeError, match=r"scale_0: attribute alpha=\[1.0\]"):
        g.save(tmp_path / "g.json")
    assert os.listdir(tmp_path) == []


ROLE_CASES = [  # tensor, role, colour
    ("x", "input", "#a8d5ba"),
    ("table", "constant", "#dda0dd"),
    ("w", "parameter", "#f4a460"),
    ("moment", "state", "#d3d3d3"),
    ("h", "buffer", "#d3d3d3"),
    ("y", "output", "#87ceeb"),
    ("grad_w", "gradient", "#f08080"),
]


@pytest.mark.parametrize("name, role, colour", ROLE_CASES)
def test_dot_colours_tensors_by_role(name, role, colour):
    g = all_roles()
    tensor = g.get_tensor(name)
    assert tensor.role == role
    label = f'"{name}\\n[4, 3]\\nfp32"'
    line = f't{tensor.id} [label={label}, shape=box, style=filled, fillcolor="{colour}"];'
    assert line in g.to_dot().splitlines()[tensor.id + 2]


@pytest.mark.parametrize("name, role, colour", ROLE_CASES)
def test_mermaid_colours_tensors_by_role(name, role, colour):
    g = all_roles()
    text, tensor_id = g.to_mermaid(), g.get_tensor(name).id
    assert f'  t{tensor_id}["{name}<br/>[4, 3]<br/>fp32"]' in text.splitlines()
    assert f"  class t{tensor_id} role_{role}" in text.splitlines()
    assert f"  classDef role_{role} fill:{colour},stroke:#333" in text.splitlines()


def test_dot_ops_edges_and_escaping():
    g = all_roles()
    ops.relu(g.tensor([2], 'odd "name"\\'), "r")
    text = g.to_dot()
    assert text.startswith('digraph "roles" {') and text.rstrip().endswith("}")
    assert 'op0 [label="multiply_0\\nmultiply", shape=ellipse, style=filled, ' \
           'fillcolor="#ffffcc"];' in text
    assert 'label="copy_2\\ncopy\\n(backward)"' in text
    assert "t0 -> op0;" in text and "op0 -> t4;" in text
    assert '"odd \\"name\\"\\\\\\n[2]\\nfp32"' in text
    assert text.count("shape=ellipse") == g.num_operations()
    assert text.count("shape=box") == len(g.tensors())


def test_dot_marks_accumulated_outputs_dashed():
    g = LogicalGraph("acc")
    a, b = g.tensor([2, 3], "a"), g.tensor([3, 4], "b")
    c = ops.gemm(a, b, "c")
    ops.gemm(a, b, c, 1.0, 1.0)
    assert "t2 -> op1 [style=dashed];" in g.to_dot()
    assert "t2 -.-> op1" in g.to_mermaid()
    assert "t2 -> op0 [style=dashed];" not in g.to_dot()


def test_mermaid_structure_and_escaping(mlp):
    ops.relu(mlp.get_tensor("y"), 'a "quoted" <b>#1')
    text = mlp.to_mermaid()
    assert text.startswith("flowchart TD\n")
    assert '(["gemm_0<br/>gemm"])' in text
    assert "class op0,op1,op2,op3,op4 op_node" in text
    assert "classDef op_node fill:#ffffcc" in text
    assert '"a #quot;quoted#quot; #lt;b#gt;#35;1<br/>[10, 64]<br/>fp32"' in text


def test_to_json_content(mlp):
    data = mlp.to_json()
    assert json.loads(json.dumps(data)) == data
    assert data["format"] == "nntile_spmd.graph" and data["version"] == 1
    x = data["tensors"][0]
    assert x == {"name": "x", "shape": [784, 64], "dtype": "fp32", "role": "input",
                 "requires_grad": False, "persistent": False, "external": True,
                 "is_input": True, "is_output": False, "grad_of": None,
                 "parallel_dim": None, "copy_of": None, "causal_dims": None}
    assert data["ops"][0] == {"name": "gemm_0", "type": "gemm", "phase": "forward",
                              "inputs": ["w1", "x"], "outputs": ["h"],
                              "attrs": {"alpha": 1.0, "beta": 0.0, "trans_a": False,
                                        "trans_b": False, "ndim": 1, "batch_ndim": 0}}
    assert [t["role"] for t in data["tensors"]].count("parameter") == 3


def test_render_without_graphviz_raises(monkeypatch, tmp_path):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(RuntimeError, match="graphviz"):
        empty().render(tmp_path / "g.svg")
    assert os.listdir(tmp_path) == []


def fake_dot(directory, script):
    """Put a `dot` shell script first on PATH; returns its path."""
    path = directory / "dot"
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(0o755)
    return path


def test_render_pipes_dot_text_through_graphviz(monkeypatch, tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake_dot(bin_dir, 'echo "format $1"\ncat\n')
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    g = all_roles()
    g.render(tmp_path / "g.PNG")
    assert (tmp_path / "g.PNG").read_text() == "format -Tpng\n" + g.to_dot()


def test_render_reports_dot_failure(monkeypatch, tmp_path):
    fake_dot(tmp_path, 'echo "Format: bogus not recognized" >&2\nexit 1\n')
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    with pytest.raises(RuntimeError, match="bogus not recognized"):
        empty().render(tmp_path / "g.bogus")
    assert not (tmp_path / "g.bogus").exists()


@pytest.mark.parametrize("suffix, method", [(".dot", "to_dot"), (".gv", "to_dot"),
                                            (".mmd", "to_mermaid")])
def test_render_text_formats_need_no_graphviz(suffix, method, monkeypatch, tmp_path):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    g = all_roles()
    g.render(tmp_path / f"g{suffix}")
    assert (tmp_path / f"g{suffix}").read_text() == getattr(g, method)()


def test_render_needs_an_extension(tmp_path):
    with pytest.raises(ValueError, match="no extension"):
        empty().render(tmp_path / "graph")


@pytest.mark.skipif(shutil.which("dot") is None,
                    reason="graphviz's `dot` is not on PATH; runs wherever it is (the "
                           "DOT text itself is tested above without it)")
def test_render_svg_with_real_graphviz(tmp_path):
    all_roles().render(tmp_path / "g.svg")
    assert "<svg" in (tmp_path / "g.svg").read_text()
