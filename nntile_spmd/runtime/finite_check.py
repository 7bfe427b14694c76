"""Runtime layer: the optional check that every task wrote finite values, so the first
op that produced a NaN names itself instead of the loss turning NaN steps later.

On (cg.check_finite = True, or $NNTILE_SPMD_CHECK_FINITE=1), each EXEC's kernel is
wrapped: after it runs, its output tiles must hold no NaN and no +Inf. The executor
adds the op, kernel, tiles and rank to the error (executor.describe_exec), and an
uncaught error ends an MPI job naming the rank. -Inf is allowed: it is the value an
attention mask writes and the neutral element of the max and logsumexp reductions,
so a legitimate plan holds it (a fully masked score tile, its running maximum).
Off, the kernels are called as they are: the check costs nothing.
"""

from __future__ import annotations

import os

ENV_VARIABLE = "NNTILE_SPMD_CHECK_FINITE"


class NonFiniteError(FloatingPointError):
    """A task wrote a NaN or +Inf into one of its output tiles."""


def check_finite_from_env() -> bool:
    """$NNTILE_SPMD_CHECK_FINITE: "1" on, "0" or unset off."""
    value = os.environ.get(ENV_VARIABLE, "0").strip()
    if value not in ("0", "1", ""):
        raise ValueError(f"${ENV_VARIABLE} must be 0 or 1, got {value!r}")
    return value == "1"


def checked(kernel, outputs: int, xp):
    """`kernel`, then a check of its last `outputs` arguments (the tiles it wrote)."""
    if outputs == 1:       # most tasks: no loop
        def run_one(*tiles, **params):
            kernel(*tiles, **params)
            if suspect(tiles[-1], xp):
                fail(0, tiles[-1], xp)
        return run_one

    def run(*tiles, **params):
        kernel(*tiles, **params)
        for number, tile in enumerate(tiles[len(tiles) - outputs:]):
            if suspect(tile, xp):
                fail(number, tile, xp)
    return run


def suspect(tile, xp) -> bool:
    """May `tile` hold a NaN or +Inf? Its sum is NaN or +Inf if it does (inf - inf is
    NaN), and a sum reads the tile once without allocating, unlike isfinite(); a sum
    that overflowed or a -Inf only are sorted out by fail()."""
    kind = tile.dtype.kind
    if kind == "f":
        total = tile.sum()
        return not total < xp.inf      # NaN compares False, +Inf is not below inf
    return kind in "cV" and not bool(xp.isfinite(tile).all())   # complex, bf16


def fail(number, tile, xp) -> None:
    problem = describe(tile, xp)
    if problem:
        raise NonFiniteError(f"output {number} of the task holds {problem}")


def describe(tile, xp) -> str:
    """How many NaN and +Inf values `tile` holds, in words ("" for -Inf only)."""
    nan = int(xp.isnan(tile).sum())
    positive = int(xp.isposinf(tile).sum()) if tile.dtype.kind != "c" else 0
    if not nan and not positive:
        return ""
    return f"{nan} NaN and {positive} +Inf value(s) of {tile.size}"


def wrap_kernels(operands: list, xp) -> list:
    """The EXEC operands of a program index with every kernel checked (one wrapper per
    kernel and output count, shared by the EXECs that use them)."""
    wrappers, wrapped = {}, []
    for entry in operands:
        if type(entry) is tuple and len(entry) == 5:   # EXEC: (kernel, slots, in, out, op)
            kernel, tile_slots, inputs, writes, op = entry
            key = (id(kernel), len(writes))
            if key not in wrappers:
                wrappers[key] = checked(kernel, len(writes), xp)
            entry = (wrappers[key], tile_slots, inputs, writes, op)
        wrapped.append(entry)
    return wrapped
