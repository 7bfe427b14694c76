"""Every registered op has a kernel on every backend, and a backward rule or a
stated reason not to (dispatch is a table lookup, never an if-chain).
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


def family_modules():
    """Every module of the op families: graph/<family>/*.py and the one-module families."""
    from nntile_spmd.graph import families
    names = {module.__name__.rsplit(".", 1)[0] if module.__name__.endswith(".rules")
             else module.__name__ for module in families.FAMILIES.values()}
    found = []
    for name in sorted(names):
        module = importlib.import_module(name)
        if hasattr(module, "__path__"):   # a family package: ops.py, rules.py, backward.py
            found += [importlib.import_module(f"{name}.{info.name}")
                      for info in pkgutil.iter_modules(module.__path__)]
        else:
            found.append(module)
    return found


def backward_rule_functions():
    """Every rule(op, ctx) defined at the top level of an op family's module."""
    found = {}
    for module in family_modules():
        for name, value in vars(module).items():
            if name.endswith("_rule") and callable(value) and value.__module__ == \
                    module.__name__ and list(inspect.signature(value).parameters) == ["op", "ctx"]:
                found[f"{module.__name__}.{name}"] = value
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
    """The graph modules `path` imports by relative import, as dotted names under graph."""
    package = path.parent.relative_to(Path(graph.__file__).parent).parts
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package[:len(package) - node.level + 1]
            if node.module:
                names.add(".".join((*base, node.module)))
            else:
                names |= {".".join((*base, alias.name)) for alias in node.names}
    return names


def test_builders_never_import_rules_and_families_register_explicitly():
    """Builders (graph/ops.py, <family>/ops.py, norms.py) import no rule module: the rules'
    gradients call builders through nntile_spmd.ops, so the other direction would be a
    cycle. And importing a family adds nothing to a registry: only families.register_all
    does (graph/__init__.py calls it once)."""
    root = Path(graph.__file__).parent
    builders = [root / "ops.py", root / "norms.py", *root.glob("*/ops.py")]
    below_rules = {}
    for path in builders:
        rules = {name for name in relative_imports(path)
                 if name.endswith(("rules", "backward")) or name == "families"}
        if rules:
            below_rules[str(path.relative_to(root))] = sorted(rules)
    assert not below_rules, below_rules
    from nntile_spmd.graph import families
    rebuilt = {}
    families.register_all(rebuilt)
    assert rebuilt == REGISTRY
    with pytest.raises(AssertionError, match="registered twice"):
        families.FAMILIES["linalg"].register(rebuilt)


FAMILY_TABLE = ("<!-- family table: tests/test_registry_kernels.py rebuilds it -->",
                "<!-- end of the family table -->")


def formula_home(name) -> str:
    """Where kernel `name`'s formula is written: a rule's in nntile_kernels/formulas/, else
    read from the cpu table's entry."""
    from nntile_kernels import cpu, formulas, reference
    if name in formulas.FAMILY_OF:
        return f"`formulas/{formulas.FAMILY_OF[name]}.py`"
    kernel = cpu.KERNELS[name]
    if kernel is reference.KERNELS.get(name):
        return "the reference's own (one xp text)"
    module = (getattr(kernel, "__module__", None) or type(kernel).__module__).split(".")[-1]
    # the cpu_rules*.py loops are generated from formulas: one without a formula is stale
    assert not module.startswith("cpu_rules"), f"{name}: a generated loop with no formula"
    if module.startswith("cpu"):
        return "by hand (`cpu.HAND_WRITTEN`)"
    return "other kernels composed"


def kernel_families() -> dict:
    """kernel -> the op family whose module of nntile_kernels/formulas/ holds its formula:
    the first family (graph order) whose entries name it as their kernel, else the first
    whose plan merges partial results with it (an entry's combine: maximum, minimum and
    logsumexp_merge are no op's kernel, reductions' max, min and logsumexp merge by them)."""
    from nntile_spmd.graph.families import FAMILIES
    specs = {}
    for family, module in FAMILIES.items():
        entries = {}
        module.register(entries)
        specs[family] = entries.values()
    found = {}
    for field in ("kernel", "combine"):
        for family, entries in specs.items():
            for spec in entries:
                if getattr(spec, field):
                    found.setdefault(getattr(spec, field), family)
    return found


def test_each_formula_sits_in_the_module_of_its_op_family():
    """A newcomer finds an op's formula under its family's name: formulas/<family>.py
    defines exactly the rules of the kernels that family's ops call first, and the
    family's graph-side docstring points to it."""
    from nntile_kernels import formulas
    from nntile_spmd.graph.families import FAMILIES
    assert list(formulas.FAMILY_MODULES) == [f for f in FAMILIES if f in formulas.FAMILY_MODULES]
    for family, module in formulas.FAMILY_MODULES.items():
        assert module.__name__ == f"nntile_kernels.formulas.{family}"
        graph_side = FAMILIES[family].__name__.removesuffix(".rules")   # the family's package
        assert f"nntile_kernels/formulas/{family}.py" in importlib.import_module(
            graph_side).__doc__, f"{graph_side}'s docstring names its formulas' module"
        registries = {name for name, value in vars(module).items()
                      if name.isupper() and name[0] != "_" and isinstance(value, dict)}
        assert registries <= set(formulas.KINDS), f"{family}: {registries}: not a kind"
    families = kernel_families()
    misplaced = {name: f"in {family}, called first by {families.get(name)}"
                 for name, family in formulas.FAMILY_OF.items() if families.get(name) != family}
    assert not misplaced, misplaced
    assert sum(map(len, (getattr(formulas, kind) for kind in formulas.KINDS))) == \
        len(formulas.FAMILY_OF) > 70


def test_a_formula_defined_twice_is_refused(monkeypatch):
    from nntile_kernels import formulas
    monkeypatch.setattr(formulas.rope, "BROADCAST",
                        {**formulas.rope.BROADCAST, "add_slice": formulas.BROADCAST["add_slice"]})
    with pytest.raises(ValueError, match=r"add_slice: .*reductions\.py and .*rope\.py"):
        formulas._assembled()


def family_table() -> str:
    """docs/ops.md's table: per op family (graph/families.py), its kernels by where
    their formula is written."""
    from nntile_spmd.graph.families import FAMILIES
    rows = ["| op family | kernels, by where the formula is written |", "|---|---|"]
    for family, module in FAMILIES.items():
        entries = {}
        module.register(entries)
        homes = {}
        for kernel in sorted({spec.kernel for spec in entries.values() if spec.kernel}):
            homes.setdefault(formula_home(kernel), []).append(kernel)
        rows.append(f"| {family} | " + "; ".join(
            f"{home}: {', '.join(kernels)}" for home, kernels in sorted(homes.items())) + " |")
    return "\n".join(rows)


def test_the_docs_family_table_is_the_code():
    """docs/ops.md's table of op families and where each kernel's formula lives equals
    what the registry and the cpu table say (rewrite it from family_table())."""
    text = (Path(__file__).resolve().parents[1] / "docs" / "ops.md").read_text()
    start, end = (text.index(marker) for marker in FAMILY_TABLE)
    assert text[start + len(FAMILY_TABLE[0]):end].strip() == family_table()
