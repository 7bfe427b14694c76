"""`import nntile_spmd` pulls in no numba, mpi4py, cupy, scipy or ml_dtypes (graph/ is inert
data; ml_dtypes, most of the import time before, loads with the first bf16 tile), so
building and planning graphs stays cheap. The import time is a measurement, not asserted here: a
loaded machine doubles it."""

import json
import subprocess
import sys
from pathlib import Path

from nntile_spmd.graph.dtypes import ALL_DTYPES, ITEMSIZE, storage_dtype

REPO_ROOT = Path(__file__).resolve().parents[2]

HEAVY = ("numba", "mpi4py", "cupy", "llvmlite", "scipy", "ml_dtypes", "torch")
PROBE = f"HEAVY = {HEAVY!r}" + """
import json, sys, time
start = time.perf_counter()
import nntile_spmd
import nntile_spmd.graph.analysis, nntile_spmd.graph.export
seconds = time.perf_counter() - start
heavy = sorted(name for name in sys.modules
               if name.split(".")[0] in HEAVY)
print(json.dumps({"seconds": seconds, "heavy": heavy}))
"""


def test_import_is_light():
    # A fresh interpreter: this test process may already have numba or mpi4py loaded.
    result = subprocess.run([sys.executable, "-c", PROBE], cwd=REPO_ROOT, check=True,
                            capture_output=True, text=True, timeout=60)
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["heavy"] == [], f"import nntile_spmd loaded {report['heavy']}"


def test_itemsize_is_the_storage_dtypes():
    # ITEMSIZE is written out so that sizing a graph loads no ml_dtypes; it must agree.
    assert ITEMSIZE == {name: storage_dtype(name).itemsize for name in ALL_DTYPES}
    assert storage_dtype("bf16").name == "bfloat16"
