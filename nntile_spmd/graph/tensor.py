"""Graph layer: TensorNode, a logical tensor (shape, dtype, role; no tiles).

Imports nothing from plan/ or runtime/, and no numba, cupy or mpi4py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Union

from .dtypes import ITEMSIZE, check_dtype

if TYPE_CHECKING:
    from .logical_graph import LogicalGraph

# A dimension is a concrete size or a symbol (such as "seq") bound later by g.bind().
Dim = Union[int, str]

ROLE_COLORS = {
    "input": "#a8d5ba",
    "parameter": "#f4a460",
    "constant": "#dda0dd",
    "buffer": "#d3d3d3",
    "state": "#d3d3d3",
    "output": "#87ceeb",
    "gradient": "#f08080",
}


def check_shape(shape) -> tuple:
    """Validate a shape given by the user: non-negative ints or symbol names."""
    checked = []
    for dim in shape:
        if isinstance(dim, str) and dim.isidentifier():
            checked.append(dim)
        elif isinstance(dim, int) and not isinstance(dim, bool) and dim > 0:
            checked.append(int(dim))
        else:
            raise ValueError(f"bad dimension {dim!r} in shape {list(shape)}: "
                             "expected a positive int or a symbol name")
    return tuple(checked)


@dataclass(eq=False)
class TensorNode:
    """A logical tensor; its role (input, parameter, gradient, activation) follows from its
    attributes (external, persistent, requires_grad, grad_of, is_input, is_output)."""

    graph: LogicalGraph = field(repr=False)
    id: int
    name: str
    shape: tuple
    dtype: str = "fp32"
    requires_grad: bool = False
    persistent: bool = False
    external: bool = False
    is_input: bool = False
    is_output: bool = False
    grad_of: str | None = None   # name of the tensor this one is the gradient of
    # The dim the "tp" preset splits over ranks, set by models that lay out
    # Megatron-style tensor parallelism themselves (heads, MLP inner dim, vocab);
    # None leaves the choice to the preset's own rule.
    parallel_dim: int | None = None
    # The parameter this tensor is a cast of (mixed precision's compute copy): the
    # "fsdp" preset shards it with that parameter, so the cast runs on the owner and
    # the gather moves the copy's (bf16) bytes, not the master's.
    copy_of: str | None = None
    # (key dim, query dim) of a causal block structure: a tile every entry of which has
    # key index > query index is structurally absent (causal attention's scores and
    # probabilities, and their gradients): it is never stored, no task writes it, and
    # plan/lowering.py drops the steps that read it (see absent_tiles there).
    causal_dims: tuple | None = None

    def __post_init__(self):
        self.shape = check_shape(self.shape)
        check_dtype(self.dtype)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def is_symbolic(self) -> bool:
        return any(isinstance(dim, str) for dim in self.shape)

    @property
    def size(self) -> int:
        """Number of elements (shape must be concrete)."""
        if self.is_symbolic:
            raise ValueError(f"tensor {self.name} has symbolic shape {list(self.shape)}; "
                             "bind its symbols with g.bind({...}) first")
        count = 1
        for dim in self.shape:
            count *= dim
        return count

    @property
    def nbytes(self) -> int:
        return self.size * ITEMSIZE[self.dtype]

    @property
    def role(self) -> str:
        """input, constant, parameter, gradient, state, buffer or output."""
        if self.external:
            return "constant" if self.persistent else "input"
        if self.persistent and self.requires_grad:
            return "parameter"
        if self.grad_of is not None:
            return "gradient"
        if self.is_output:
            return "output"
        if self.persistent:
            return "state"
        return "buffer"

    def mark_input(self, flag: bool = True) -> TensorNode:
        """Mark as provided by bind_data(); inputs are never freed during execute()."""
        self.is_input = bool(flag)
        return self

    def split_for_tp(self, dim: int) -> TensorNode:
        """Ask the "tp" preset to split this tensor's axis `dim` over ranks."""
        if not isinstance(dim, int) or not 0 <= dim < self.ndim:
            raise ValueError(f"split_for_tp: dim {dim!r} out of range for {self.describe()}")
        self.parallel_dim = dim
        return self

    def mark_output(self, flag: bool = True) -> TensorNode:
        """Mark as retrieved by get_output(); outputs are never freed during execute()."""
        self.is_output = bool(flag)
        return self

    @property
    def keeps_storage(self) -> bool:
        """True if tiles of this tensor live across execute() calls."""
        return self.is_input or self.is_output or self.persistent or self.external

    def describe(self) -> str:
        """Short form used in error messages: name[shape]:dtype."""
        dims = ", ".join(str(dim) for dim in self.shape)
        return f"{self.name}[{dims}]:{self.dtype}"

    def __repr__(self) -> str:
        return f"TensorNode({self.describe()}, role={self.role})"
