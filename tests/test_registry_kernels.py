"""Every registered op has a kernel on every backend, and a backward rule or a
stated reason not to (STYLE.md: dispatch is a table lookup, never an if-chain)."""

import pytest

import nntile_kernels
from nntile_spmd.graph import BACKWARD_RULES, REGISTRY



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
