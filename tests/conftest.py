"""Setup shared by every test folder: import paths and a deterministic hypothesis.

Single-process tests run with plain `pytest`; multi-rank tests are marked
`@pytest.mark.mpi(min_size=N)` and run under
`mpiexec -n N python -m pytest --with-mpi -p no:cacheprovider --basetemp=...`.
GPU tests are marked `@pytest.mark.gpu` (select them with `-m gpu`) and skip, with
the reason, where CuPy or a CUDA device is missing (tests/cuda_support.py).
"""

import os
import sys
from pathlib import Path

import pytest

_TESTS = Path(__file__).resolve().parent
for _path in (str(_TESTS.parent), str(_TESTS)):   # `nntile_kernels` and `helpers` importable
    if _path not in sys.path:
        sys.path.insert(0, _path)

from cuda_support import cuda_unavailable_reason  # noqa: E402 - needs the path above


def pytest_configure(config):
    """The CPU tiers run on the CPU where a GPU is present too: device="auto" would take
    it (runtime/device_choice.py). A mark expression that selects the gpu tests leaves
    the choice to them, and a caller's NNTILE_SPMD_DEVICE stands."""
    if "gpu" not in config.option.markexpr.replace("not gpu", ""):
        os.environ.setdefault("NNTILE_SPMD_DEVICE", "cpu")
    if os.environ.get("NNTILE_SPMD_TEST_COVERAGE_CONTEXTS"):
        config.pluginmanager.register(CoverageContextPerTest())


def pytest_collection_modifyitems(config, items):
    """Skip the gpu-marked tests, saying what is missing, where CUDA is not usable."""
    gpu_items = [item for item in items if item.get_closest_marker("gpu")]
    reason = cuda_unavailable_reason() if gpu_items else None
    for item in gpu_items if reason else ():
        item.add_marker(pytest.mark.skip(reason=reason))

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


CPU_LOG = os.environ.get("NNTILE_SPMD_TEST_CPU_LOG")


if CPU_LOG:
    import resource
    import time

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(item, nextitem):
        """Append each test's CPU seconds (this process and the child processes it waited
        for: subprocess jobs, mpiexec and its ranks) to $NNTILE_SPMD_TEST_CPU_LOG: a
        measure of a test's cost that another job on the machine does not inflate, as
        it does wall time. The last column is the rank under mpiexec."""
        def cpu():
            children = resource.getrusage(resource.RUSAGE_CHILDREN)
            return time.process_time(), children.ru_utime + children.ru_stime
        own, waited = cpu()
        yield
        own_after, waited_after = cpu()
        with open(CPU_LOG, "a") as log:
            log.write(f"{own_after - own:.3f}\t{waited_after - waited:.3f}\t{item.nodeid}"
                      f"\t{os.environ.get('PMI_RANK', '')}\n")



class CoverageContextPerTest:
    """Under `coverage run`, each test's lines and branches recorded under its node id
    (pytest-cov's --cov-context=test, without pytest-cov), so that tests/coverage_arcs.py
    can say what a set of tests reaches that the others do not. A plugin object, as this
    module's own pytest_runtest_protocol may already be the CPU log's."""

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        import coverage
        running = coverage.Coverage.current()
        if running is not None:
            running.switch_context(item.nodeid)
        yield
        if running is not None:
            running.switch_context("")
