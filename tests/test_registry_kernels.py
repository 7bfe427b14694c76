"""Every registered op has a kernel on every backend, and a backward rule or a
stated reason not to (STYLE.md: dispatch is a table lookup, never an if-chain).
An op's backward rule is part of its registry entry (OpSpec.backward): autodiff reads
it from there, and BACKWARD_RULES is a view of the entries."""

import ast
import dataclasses
import importlib
import inspect
import pkgutil
from pathlib import Path

import pytest

import nntile_kernels
import nntile_spmd as nt
from nntile_spmd import graph, ops
from nntile_spmd.graph import BACKWARD_RULES, REGISTRY, OpSpec


@pytest.mark.parametrize("backend",
                         ["reference", "cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_every_op_has_a_kernel(backend):
    table = nntile_kernels.get_kernels(backend)
    # the plan also calls each op's combine kernel to merge partial results across ranks
    needed = {spec.kernel for spec in REGISTRY.values()} | \
        {spec.combine for spec in REGISTRY.values() if spec.combine is not None}
    assert needed <= set(table), f"{backend} lacks {sorted(needed - set(table))}"


def test_backward_rules_cover_differentiable_ops():
    forward_only = {name for name, spec in REGISTRY.items() if not spec.differentiable}
    in_place = {name for name in REGISTRY if name.endswith("_inplace")}
    backward_forms = {name for name in REGISTRY if name.endswith("_backward")}
    expected = set(REGISTRY) - forward_only - in_place - backward_forms
    assert expected <= set(BACKWARD_RULES), sorted(expected - set(BACKWARD_RULES))
    assert set(BACKWARD_RULES) <= set(REGISTRY)


def test_backward_rules_is_a_view_of_the_entries():
    from_entries = {name: spec.backward for name, spec in REGISTRY.items()
                    if spec.backward is not None}
    assert dict(BACKWARD_RULES) == from_entries
    assert len(BACKWARD_RULES) == len(from_entries)
    assert BACKWARD_RULES.get("fill") is None and "fill" not in BACKWARD_RULES
    with pytest.raises(TypeError):
        BACKWARD_RULES["fill"] = from_entries["gemm"]   # read-only: entries are the source


def backward_rule_functions():
    """Every rule(op, ctx) defined at the top level of a graph/backward_*.py module."""
    found = {}
    for module_info in pkgutil.iter_modules(graph.__path__):
        if not module_info.name.startswith("backward_"):
            continue
        module = importlib.import_module(f"nntile_spmd.graph.{module_info.name}")
        for name, value in vars(module).items():
            if name.endswith("_rule") and callable(value) and \
                    list(inspect.signature(value).parameters) == ["op", "ctx"]:
                found[f"{module_info.name}.{name}"] = value
    return found


def test_every_backward_rule_belongs_to_an_entry():
    """A rule no entry names would be a gradient lost when the tables were merged."""
    rules = backward_rule_functions()
    assert len(rules) >= 40, sorted(rules)   # the modules were found and read
    used = {spec.backward for spec in REGISTRY.values()}
    orphans = sorted(name for name, rule in rules.items() if rule not in used)
    assert not orphans, orphans


def test_a_backward_rule_on_a_forward_only_op_is_refused():
    with pytest.raises(ValueError, match="adam_step: a backward rule"):
        dataclasses.replace(REGISTRY["adam_step"], backward=REGISTRY["gemm"].backward)
    assert OpSpec.__dataclass_fields__["backward"].default is None


def test_grad_calls_the_rule_of_the_entry(monkeypatch):
    def graph_through_gelu():
        g = nt.LogicalGraph("g")
        x = g.tensor([4, 3], "x", dtype="fp64", requires_grad=True, persistent=True)
        return g, x, ops.sum(ops.gelu(x, "y"), "loss")

    called = []
    spec = REGISTRY["gelu"]
    monkeypatch.setitem(REGISTRY, "gelu", dataclasses.replace(
        spec, backward=lambda op, ctx: called.append(op.outputs[0].name) or spec.backward(op, ctx)))
    g, x, loss = graph_through_gelu()
    nt.grad(g, loss, [x])
    assert called == ["y"]
    monkeypatch.setitem(REGISTRY, "gelu", dataclasses.replace(spec, backward=None))
    g, x, loss = graph_through_gelu()
    with pytest.raises(NotImplementedError, match=r"\(gelu\) has no backward rule"):
        nt.grad(g, loss, [x])


def relative_imports(path) -> set:
    """The sibling modules `path` imports (from .x import ..., from . import x)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            names |= {node.module} if node.module else {alias.name for alias in node.names}
    return names


def test_builders_and_backward_rules_never_import_a_rule_table():
    """registry <- ops_* <- backward_* <- rules_* (registry.py): a rule table imports the
    backward rules it names, so a builder or rule importing a table would be a cycle."""
    below_tables = {}
    for path in sorted(Path(graph.__file__).parent.glob("*.py")):
        if path.stem == "ops" or path.stem.startswith(("ops_", "backward_")):
            tables = {name for name in relative_imports(path)
                      if name.startswith("rules_") and name != "rules_common"}
            if tables:
                below_tables[path.stem] = sorted(tables)
    assert not below_tables, below_tables
