"""The numba loops of the rules are generated from their formulas (`python -m
nntile_kernels.generate` writes nntile_kernels/cpu_rules*.py); this fails when a rule or
a generator changed and the modules were not written again, and checks what the
elementwise formulas promise at the edges on every CPU backend."""

import numpy as np
import pytest

from nntile_kernels import cpu, generate, generate_cpu_rules, reference
from nntile_kernels.formulas import ELEMENTWISE, UPDATES
from nntile_kernels.fused_rules import ELEMENT_RULES


GENERATED = generate.generated()


@pytest.mark.parametrize("path", sorted(GENERATED), ids=lambda path: path.name)
def test_each_generated_module_is_what_its_generator_writes(path):
    stale = f"nntile_kernels/{path.name} is stale: run python -m nntile_kernels.generate"
    assert path.read_text() == GENERATED[path], stale


def test_every_rule_has_its_loop_and_its_fused_element_rule():
    """A rule that reads no tile (clear, fill) writes a constant: the cpu table's entry is
    the reference's evaluation of it (a NumPy fill), as are fp16 tiles of every rule."""
    looped = {name: f"nntile_kernels.{module}" for module in generate_cpu_rules.MODULES
              for name in generate_cpu_rules.module_rules(module)}
    for name, rule in ELEMENTWISE.items():
        module = looped[name] if rule.reads_tiles() else "nntile_kernels.rules"
        assert cpu.KERNELS[name].__module__ == module, name
        assert name in ELEMENT_RULES, name
    for name in UPDATES:
        assert cpu.KERNELS[name].__module__ == "nntile_kernels.cpu_rules_optim", name


@pytest.mark.parametrize("table", [cpu.KERNELS, reference.KERNELS], ids=["cpu", "reference"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_relu_keeps_nan_and_its_backward_ignores_a_masked_nan(table, dtype):
    x = np.array([np.nan, -np.inf, -1.0, 0.0, 2.0], dtype)
    y = np.empty_like(x)
    table["relu"](x, y)
    np.testing.assert_array_equal(y, np.array([np.nan, 0.0, 0.0, 0.0, 2.0], dtype))
    dy = np.array([1.0, np.nan, np.inf, np.nan, 3.0], dtype)
    dx = np.ones_like(x)
    table["relu_backward"](x, dy, dx)       # relu'(x) = 0 where x <= 0, whatever dy
    np.testing.assert_array_equal(dx, np.array([1.0, 1.0, 1.0, 1.0, 4.0], dtype))
