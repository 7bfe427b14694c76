"""Shared setup of the kernel tests: the repository root must be importable as `nntile_kernels`."""

import sys
from pathlib import Path

_ROOT = str(Path(__file__).resolve().parents[2])
if _ROOT not in sys.path:  # plain `pytest` from anywhere, no install step needed
    sys.path.insert(0, _ROOT)
