"""Runtime layer: the deadline every wait of the library obeys (receives, sends,
collectives). Standard library only: the launcher reads the same variable.
"""

from __future__ import annotations

import math
import os

ENV_VARIABLE = "NNTILE_SPMD_RECV_TIMEOUT"

# 300 s: far above any legitimate wait we measured (a receive waits for the peer's
# previous kernels, at most a few seconds for the largest tiles we plan; a collective
# waits for the slowest rank's whole step, and checkpoint writes of GBs on network
# file systems take tens of seconds), yet short enough that a stopped or hung rank
# ends a batch job within minutes instead of burning its allocation. Jobs with
# minute-long steps raise it (--recv-timeout or the variable); tests lower it.
DEFAULT_SECONDS = 300.0


def resolve_timeout(value=None) -> float:
    """The deadline in seconds: `value`, else $NNTILE_SPMD_RECV_TIMEOUT, else 300."""
    source = "recv_timeout"
    if value is None:
        value = os.environ.get(ENV_VARIABLE)
        source = f"${ENV_VARIABLE}"
        if value is None or not str(value).strip():
            return DEFAULT_SECONDS
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{source} must be a number of seconds, got {value!r}") from None
    if not (seconds > 0 and math.isfinite(seconds)):
        raise ValueError(f"{source} must be a positive finite number of seconds, got {value!r}")
    return seconds
