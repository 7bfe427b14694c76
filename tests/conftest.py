"""Setup shared by every test folder: import paths and a deterministic hypothesis.

Single-process tests run with plain `pytest`; multi-rank tests are marked
`@pytest.mark.mpi(min_size=N)` and run under
`mpiexec -n N python -m pytest --with-mpi -p no:cacheprovider --basetemp=...`.
"""

import os
import sys
from pathlib import Path

_TESTS = Path(__file__).resolve().parent
for _path in (str(_TESTS.parent), str(_TESTS)):   # `kernels` and `helpers` importable
    if _path not in sys.path:
        sys.path.insert(0, _path)

try:
    from hypothesis import HealthCheck, settings
except ImportError:   # hypothesis is a test extra; suites that use it skip without it
    pass
else:
    # Derandomized: every run (and every MPI rank, should an mpi test ever use
    # hypothesis) draws the same examples, so a failure reproduces and ranks never
    # disagree about what to compile. HYPOTHESIS_PROFILE=random explores more.
    _COMMON = dict(deadline=None, print_blob=True,
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    settings.register_profile("spmd", derandomize=True, max_examples=25, **_COMMON)
    settings.register_profile("random", derandomize=False, max_examples=100, **_COMMON)
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "spmd"))
