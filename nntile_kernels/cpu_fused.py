"""Fused elementwise kernels: one generated numba loop for a chain of elementwise kernels
over tiles of one shape (fused_rules.py spells the chain), each element read once,
temporaries kept in registers.

Arrays only: never imports nntile_spmd, mpi4py or cupy. The loops cannot be cached
on disk (their source is generated), so each chain compiles once per process and
dtype.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .cpu_fastmath import FORMULA_NAMESPACE
from .fused_rules import CONSTANTS, ELEMENT_RULES, parse_chain


def kernel_source(steps, n_arrays, param_names):
    """Python source of the numba loop of a chain over `n_arrays` flat tiles."""
    def var(slot):
        return f"v{slot}" if isinstance(slot, int) else slot
    lines = [f"def fused({', '.join(f'a{k}' for k in range(n_arrays))}"
             f"{''.join(', ' + name for name in param_names)}):",
             "    cast = a0.dtype.type"]
    lines += [f"    {name} = cast({value!r})" for name, value in CONSTANTS.items()]
    lines += [f"    c_{name} = cast({name})" for name in param_names]
    loaded, body = set(), []
    for index, step in enumerate(steps):
        rule = ELEMENT_RULES[step.kernel]
        needed = list(step.inputs) + (list(step.outputs) if rule.reads_output else [])
        for slot in needed:
            if isinstance(slot, int) and slot not in loaded:
                body.append(f"        v{slot} = a{slot}[i]")
                loaded.add(slot)
        fields = {f"i{k}": var(slot) for k, slot in enumerate(step.inputs)}
        fields.update({f"o{k}": var(slot) for k, slot in enumerate(step.outputs)})
        fields.update({f"p_{p}": f"c_s{index}_{p}" for p in rule.params})
        fields.update({f"raw_{p}": f"s{index}_{p}" for p in rule.params})
        fields["u"] = f"u{index}_"
        body += ["        " + line.format(**fields) for line in rule.lines]
        loaded.update(slot for slot in step.outputs if isinstance(slot, int))
    written = sorted({slot for step in steps for slot in step.outputs if isinstance(slot, int)})
    body += [f"        a{slot}[i] = v{slot}" for slot in written]
    lines += ["    for i in range(a0.size):"] + body
    return "\n".join(lines) + "\n"


_COMPILED = {}   # (name, n_arrays, param names) -> the numba function


def fused_kernel(name: str):
    """The callable kernel(*tiles, **params) of a fused chain name (compiled on first call)."""
    steps = parse_chain(name)

    def run(*tiles, **params):
        names = tuple(sorted(params))
        key = (name, len(tiles), names)
        function = _COMPILED.get(key)
        if function is None:
            namespace = dict(FORMULA_NAMESPACE)
            exec(kernel_source(steps, len(tiles), names), namespace)   # noqa: S102 - our text
            function = _COMPILED[key] = njit(error_model="numpy", nogil=True)(namespace["fused"])
        function(*[tile.ravel("K") for tile in tiles], *[float(params[n]) for n in names])
    run.__name__ = name
    return run


def supports(dtype) -> bool:
    """Fused loops run on float32 and float64 tiles (fp16 takes the reference kernels)."""
    return np.dtype(dtype) in (np.dtype(np.float32), np.dtype(np.float64))
