"""Every kernel's formula, one module per op family, named as the graph's families
(nntile_spmd/graph/families.py): an op's formula sits beside its graph-side story under
the same name. Each module defines its ops' entries in registries named by the kind of
rule (ELEMENTWISE, BROADCAST, REDUCTIONS, ...: the kind classes and the rule language are
rules.py's and the rules_*.py modules'); this package assembles each kind's registry
from every family, which the backends and the generators read.

A kernel's formula sits in the first family (in the graph's order) whose ops name it as
their kernel, else the first whose plan merges partial results with it (maximum,
minimum, logsumexp_merge: reductions). linalg, data_movement, convolution and random
have no module: their kernels are hand-written loops, library calls or the reference's
own array code, not rules.

Pure Python, as the kind modules are: importing it loads no numpy, numba or cupy.
"""

from . import attention, elementwise, losses, optimizers, reductions, rope

# in the order of the graph's families (tests/test_registry_kernels.py checks it)
FAMILY_MODULES = {"elementwise": elementwise, "reductions": reductions,
                  "attention": attention, "losses": losses, "optimizers": optimizers,
                  "rope": rope}
KINDS = ("ELEMENTWISE", "UPDATES", "BROADCAST", "REDUCTIONS", "EXP_REDUCTIONS", "INDEXED",
         "LOSSES", "FROM_LSE", "PICKED", "PICKED_FROM_LSE")


def _assembled():
    """kind -> {kernel: its rule} over the families; a kernel has one formula (a name in
    two registries would be two kernels of one name in a table), so a second raises."""
    registries = {kind: {} for kind in KINDS}
    homes = {}
    for family, module in FAMILY_MODULES.items():
        for kind in KINDS:
            for name, rule in getattr(module, kind, {}).items():
                if name in homes:
                    raise ValueError(f"{name}: a formula in formulas/{homes[name]}.py and "
                                     f"formulas/{family}.py")
                homes[name] = family
                registries[kind][name] = rule
    return registries, homes


_REGISTRIES, FAMILY_OF = _assembled()
ELEMENTWISE = _REGISTRIES["ELEMENTWISE"]
UPDATES = _REGISTRIES["UPDATES"]
BROADCAST = _REGISTRIES["BROADCAST"]
REDUCTIONS = _REGISTRIES["REDUCTIONS"]
EXP_REDUCTIONS = _REGISTRIES["EXP_REDUCTIONS"]
INDEXED = _REGISTRIES["INDEXED"]
LOSSES = _REGISTRIES["LOSSES"]
FROM_LSE = _REGISTRIES["FROM_LSE"]
PICKED = _REGISTRIES["PICKED"]
PICKED_FROM_LSE = _REGISTRIES["PICKED_FROM_LSE"]
