"""The element rules of fusible kernels and the names of fused chains: pure Python.

A fused chain is spelled by its kernel name, e.g. ``fused[clear(>t0)
gelu_backward(0,1>t0) add(t0,2>2)]``: each step is a kernel of ELEMENT_RULES with
its array slots, inputs before ``>`` and outputs after; a number is a tile of the
fused call (its inputs, then its outputs), ``tK`` a temporary that never becomes
a tile. Parameters arrive as ``s<step>_<name>`` keywords. The plan
(nntile_spmd/plan/fusion.py) reads this table to choose chains without loading
numba; cpu_fused.py compiles them.

Every element rule is an ELEMENTWISE formula of formulas/ (activations, add, multiply, scale, clear,
fill, hypot, maximum, ...)
in the spelling of the generated cpu_rules.py; constants and params are cast to the
tile dtype the same way, so a fused chain computes bitwise what the kernels compute
one after another (tests/plan/test_fusion.py checks it in fp64 on the MLP and GPT-2
steps).
"""

from __future__ import annotations

import re
from typing import NamedTuple

from .formulas import ELEMENTWISE
from .rules import renamed
from .rules_numba import numba_constants, numba_expression


class ElementRule(NamedTuple):
    """Element formula of one kernel: `lines` assign the outputs from the inputs.

    Placeholders {i0}, {i1}.. are the input values, {o0} the output variable, {u} a
    prefix that makes the step's own temporaries unique; the
    output of an accumulating kernel ({o0} += ...) is read before it is written.
    `params` are the kernel's keyword parameters: `{p_name}` cast to the tile dtype,
    `{raw_name}` as given (a case's condition reads those).
    """

    n_inputs: int
    lines: tuple
    params: tuple = ()
    reads_output: bool = False


def _from_formula(rule):
    """The element rule of an elementwise formula in the numba spelling that cpu_rules.py's
    loops use, so a chain computes bitwise what those kernels compute one after another.
    A case becomes a conditional expression: the inputs only the other value names are
    not read where it holds (add's y when beta == 0)."""
    slots = {name: f"{{i{k}}}" for k, name in enumerate(rule.inputs)}
    slots.update({temp: "{u}" + temp for temp, _ in rule.let})
    slots.update({name: f"{{p_{name}}}" for name in rule.params})

    def spelled(text):
        return renamed(numba_expression(text), slots)
    lines = [f"{{u}}{temp} = {spelled(text)}" for temp, text in rule.let]
    value = spelled(rule.value)
    for condition, case_value in reversed(rule.cases):
        test = renamed(condition, rule.params, "{{raw_{}}}")
        value = f"{spelled(case_value)} if {test} else {value}"
    lines.append(f"{{o0}} {'+=' if rule.accumulate else '='} {value}")
    return ElementRule(len(rule.inputs), tuple(lines), rule.params, reads_output=rule.accumulate)


ELEMENT_RULES = {name: _from_formula(rule) for name, rule in ELEMENTWISE.items()}

# The constants the rules use, cast to the tile dtype at the top of the kernel.
CONSTANTS = numba_constants()

_STEP = re.compile(r"(\w+)\(([^>]*)>([^)]*)\)")


class Step(NamedTuple):
    kernel: str
    inputs: tuple     # slots: int (a tile of the call) or "tK" (a temporary)
    outputs: tuple


def parse_chain(name: str) -> list:
    """The steps of a fused kernel name (see the module docstring)."""
    if not (name.startswith("fused[") and name.endswith("]")):
        raise ValueError(f"{name!r} is not a fused kernel name")

    def slots(text):
        return tuple(int(s) if s.isdigit() else s for s in text.split(",") if s)
    steps = [Step(kernel, slots(ins), slots(outs))
             for kernel, ins, outs in _STEP.findall(name[len("fused["):-1])]
    for step in steps:
        if step.kernel not in ELEMENT_RULES:
            raise ValueError(f"fused kernel {name!r}: {step.kernel!r} has no element rule")
    return steps


def chain_name(steps) -> str:
    """Inverse of parse_chain."""
    def text(slots):
        return ",".join(map(str, slots))
    return "fused[" + " ".join(f"{s.kernel}({text(s.inputs)}>{text(s.outputs)})"
                               for s in steps) + "]"
