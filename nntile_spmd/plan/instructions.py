"""Plan layer: the four instructions of a rank's program and tile keys.

A tile key is (tensor_name, tile_coord). Programs are lists of these tuples; the
executor dispatches on the class through a table.
"""

from __future__ import annotations

from typing import NamedTuple

# new_tuple(Send, (key, peer, tag, nbytes, consumer)) builds an instruction without the
# NamedTuple constructor's Python frame: 0.7 us instead of 1.6 us per instruction
# (timeit, this machine), and the all-ranks planner builds ~10^6 of them at 64 ranks.
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
    params: dict
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
