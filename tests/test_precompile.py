"""The ahead-of-time kernel compile (nntile_spmd/precompile.py): its manifest names kernels
that exist and holds every signature the models it stands for compile; the workers' shares
keep each function whole."""

import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from nntile_spmd.precompile import MANIFEST, dispatchers, of_dtypes, shares

ROOT = Path(__file__).resolve().parents[1]
STALE = "stale: rerun python -m nntile_spmd.precompile --record"


def test_the_manifest_names_kernels_that_exist():
    entries = pickle.loads(MANIFEST.read_bytes())
    known = dispatchers()
    assert entries and not [entry[:2] for entry in entries if entry[:2] not in known], STALE
    assert of_dtypes(entries, ["fp32"]) and of_dtypes(entries, ["fp64"])


def test_a_share_holds_whole_functions():
    entries = [("m", "f", 1), ("m", "f", 2), ("m", "g", 1), ("m", "h", 1), ("m", "f", 3)]
    split = shares(entries, 2)
    assert sorted(len(share) for share in split) == [2, 3]
    assert {entry[1] for entry in split[0]} == {"f"}


@pytest.mark.slow
def test_the_manifest_holds_what_the_models_compile():
    """In a process of its own (this one compiles other signatures too)."""
    code = ("import pickle\n"
            "from nntile_spmd.precompile import MANIFEST, dispatchers, run_models\n"
            "run_models()\n"
            "have = {(e[0], e[1], e[2]) for e in pickle.loads(MANIFEST.read_bytes())}\n"
            "print([(m, n, str(s)) for (m, n), d in dispatchers().items()\n"
            "       for s in d.signatures if (m, n, s) not in have])\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == "[]", f"{STALE}; missing {result.stdout}"
