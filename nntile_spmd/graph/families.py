"""Graph layer: the op families, and the one place their registry entries are added.

An op's whole graph-side story lives in its family: the builder (`<family>/ops.py`), the
registry entry (`<family>/rules.py`) and the backward rule (in rules.py, or
`<family>/backward.py` where the family is large). Builders sit apart from the rules
because the rules' gradients call other families' builders through `nntile_spmd.ops`,
which imports every family's builders: keeping the two apart keeps the imports acyclic.
Norms are composites of other families' ops and register nothing of their own.
"""

from __future__ import annotations

from . import optimizers
from .attention import rules as attention
from .convolution import rules as convolution
from .data_movement import rules as data_movement
from .elementwise import rules as elementwise
from .linalg import rules as linalg
from .losses import rules as losses
from .random import rules as random
from .reductions import rules as reductions
from .rope import rules as rope

FAMILIES = {"elementwise": elementwise, "reductions": reductions, "linalg": linalg,
            "attention": attention, "losses": losses, "optimizers": optimizers,
            "data_movement": data_movement, "convolution": convolution, "rope": rope,
            "random": random}


def register_all(registry: dict) -> None:
    """Add every family's entries to `registry` (an empty dict)."""
    for family in FAMILIES.values():
        family.register(registry)
