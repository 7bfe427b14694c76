"""The element rules of fusible kernels and the names of fused chains: pure Python.

A fused chain is spelled by its kernel name, e.g. ``fused[clear(>t0)
gelu_backward(0,1>t0) add(t0,2>2)]``: each step is a kernel of ELEMENT_RULES with
its array slots, inputs before ``>`` and outputs after; a number is a tile of the
fused call (its inputs, then its outputs), ``tK`` a temporary that never becomes
a tile. Parameters arrive as ``s<step>_<name>`` keywords. The plan
(nntile_spmd/plan/fusion.py) reads this table to choose chains without loading
numba; cpu_fused.py compiles them.

Every formula is the expression of the same-named kernel in cpu_elementwise.py (and
reference.clear), with its constants cast to the tile dtype the same way, so a fused
chain computes bitwise what the kernels compute one after another
(tests/plan/test_fusion.py checks it in fp64 on the MLP and GPT-2 steps).
"""

from __future__ import annotations

import math
import re
from typing import NamedTuple


class ElementRule(NamedTuple):
    """Element formula of one kernel: `lines` assign the outputs from the inputs.

    Placeholders {i0}, {i1}.. are the input values, {o0} the output variable, {u} a
    prefix that makes the step's own temporaries unique; the
    output of an accumulating kernel ({o0} += ...) is read before it is written.
    `params` are the kernel's keyword parameters, cast to the tile dtype as `{p_name}`.
    """

    n_inputs: int
    lines: tuple
    params: tuple = ()
    reads_output: bool = False


ELEMENT_RULES = {
    "clear": ElementRule(0, ("{o0} = zero",)),
    # add: y is not read when beta == 0 (it may be uninitialized), as in cpu_elementwise
    "add": ElementRule(2, ("{o0} = {p_alpha} * {i0} if {beta_is_zero} else "
                           "{p_alpha} * {i0} + {p_beta} * {i1}",), ("alpha", "beta")),
    "multiply": ElementRule(2, ("{o0} = {p_alpha} * {i0} * {i1}",), ("alpha",)),
    "scale": ElementRule(1, ("{o0} = {p_alpha} * {i0}",), ("alpha",)),
    "gelu": ElementRule(1, ("{o0} = half * {i0} * (one + fast_erf({i0} * rsqrt2))",)),
    "gelutanh": ElementRule(1, ("{o0} = half * {i0} * (one + fast_tanh(k_tanh * "
                                "({i0} + c_cubic * {i0} * {i0} * {i0})))",)),
    "relu": ElementRule(1, ("{o0} = max({i0}, zero)",)),
    "silu": ElementRule(1, ("{o0} = {i0} / (one + fast_exp(-{i0}))",)),
    "gelu_backward": ElementRule(2, (
        "{u}cdf = half * (one + fast_erf({i0} * rsqrt2))",
        "{u}pdf = fast_exp(-half * {i0} * {i0}) * rsqrt_2pi",
        "{o0} += ({u}cdf + {i0} * {u}pdf) * {i1}"), reads_output=True),
    "gelutanh_backward": ElementRule(2, (
        "{u}th = fast_tanh(k_tanh * ({i0} + c_cubic * {i0} * {i0} * {i0}))",
        "{u}inner = k_tanh * (one + three_c * {i0} * {i0})",
        "{o0} += (half * (one + {u}th) + half * {i0} * (one - {u}th * {u}th) * {u}inner) * {i1}"),
        reads_output=True),
    "relu_backward": ElementRule(2, ("{o0} = {o0} + {i1} if {i0} > zero else {o0}",),
                                 reads_output=True),
    "silu_backward": ElementRule(2, (
        "{u}s = one / (one + fast_exp(-{i0}))",
        "{o0} += {u}s * (one + {i0} * (one - {u}s)) * {i1}"), reads_output=True),
}

# The constants of cpu_elementwise, cast to the tile dtype at the top of the kernel.
CONSTANTS = {"zero": 0.0, "one": 1.0, "half": 0.5, "rsqrt2": 1.0 / math.sqrt(2.0),
             "rsqrt_2pi": 1.0 / math.sqrt(2.0 * math.pi),
             "k_tanh": math.sqrt(2.0 / math.pi), "c_cubic": 0.044715,
             "three_c": 3.0 * 0.044715}

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
