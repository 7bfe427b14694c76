"""`import nntile_spmd` pulls in no numba, mpi4py or cupy (graph/ is inert data), so building
and planning graphs stays cheap. The import time is a measurement, not asserted here: a
loaded machine doubles it."""

import json
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import json, sys, time
start = time.perf_counter()
import nntile_spmd
import nntile_spmd.graph.analysis, nntile_spmd.graph.export
seconds = time.perf_counter() - start
heavy = sorted(name for name in sys.modules
               if name.split(".")[0] in ("numba", "mpi4py", "cupy", "llvmlite"))
print(json.dumps({"seconds": seconds, "heavy": heavy}))
"""


def test_import_is_light():
    # A fresh interpreter: this test process may already have numba or mpi4py loaded.
    result = subprocess.run([sys.executable, "-c", PROBE], cwd=REPO_ROOT, check=True,
                            capture_output=True, text=True, timeout=60)
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["heavy"] == [], f"import nntile_spmd loaded {report['heavy']}"
