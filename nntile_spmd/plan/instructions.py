"""Plan layer: the instructions of a rank's program and tile keys.

A tile key is (tensor_name, tile_coord). Programs are lists of these tuples; the
executor dispatches on the class through a table.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from .kernel_params import KernelParams

# new_tuple(Send, (key, peer, tag, nbytes, consumer)) builds an instruction without the
# NamedTuple constructor's Python frame. It matters only where ~10^6 instructions are
# built (every rank's programs at once: the all-ranks builder.py and memory.py's FREEs;
# docs/benchmarks.md, "Measurements behind code constants"); one rank's program
# (rank_builder.py) gains nothing measurable, so the per-rank builder and offloading use
# the plain constructors.
new_tuple = tuple.__new__


def key_str(key) -> str:
    """B[1] / A[0,1] / loss[] for messages and listings."""
    name, coord = key
    return f"{name}[{','.join(map(str, coord))}]"


class Recv(NamedTuple):
    """Receive tile `key` (its current version) from rank `peer`."""

    key: tuple
    peer: int
    tag: int
    nbytes: int
    consumer: str

    def __str__(self) -> str:
        return f"RECV {key_str(self.key)}<-{self.peer}"


class Send(NamedTuple):
    """Send tile `key` to rank `peer`; posted as soon as that version exists."""

    key: tuple
    peer: int
    tag: int
    nbytes: int
    consumer: str       # the op the receiver needs it for (stats attribute bytes to it)

    def __str__(self) -> str:
        return f"SEND {key_str(self.key)}->{self.peer}"


class Exec(NamedTuple):
    """Run kernel on tiles `keys` (inputs then outputs); `writes` are the outputs."""

    kernel: str
    keys: tuple
    reads: tuple
    writes: tuple
    params: KernelParams   # immutable, typed (plan/kernel_params.py)
    flops: int
    op_name: str

    def __str__(self) -> str:
        inputs = [key_str(k) for k in self.keys[:len(self.keys) - len(self.writes)]]
        outputs = [key_str(k) for k in self.writes]
        shown = [f"{name}={value}" for name, value in self.params.items()
                 if name in ("beta", "vocab_offset")]
        return f"EXEC {self.kernel}({','.join(inputs)}->{','.join(outputs)}" + \
            "".join(f",{item}" for item in shown) + ")"


class Free(NamedTuple):
    """Release this rank's storage of tile `key` (after its last use)."""

    key: tuple

    def __str__(self) -> str:
        return f"FREE {key_str(self.key)}"


class Evict(NamedTuple):
    """Move tile `key` out of device memory (plan/offload.py): to host memory from a
    GPU, to a memory-mapped file from host memory. `write_back` is False when the
    offloaded copy is still current (nothing wrote the tile since it was fetched) or
    the tile's next touch overwrites it: then only the device buffer is released."""

    key: tuple
    nbytes: int
    write_back: bool

    def __str__(self) -> str:
        return f"EVICT {key_str(self.key)}" + ("" if self.write_back else " (clean)")


class Prefetch(NamedTuple):
    """Bring tile `key` back into device memory from its offloaded copy."""

    key: tuple
    nbytes: int

    def __str__(self) -> str:
        return f"PREFETCH {key_str(self.key)}"
