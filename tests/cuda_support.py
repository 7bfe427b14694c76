"""Whether this machine can run the GPU tests: the one place that asks CuPy.

Tests that need CuPy and a device carry `@pytest.mark.gpu`; tests/conftest.py skips
them with `cuda_unavailable_reason()` where it is not None. `pytest -m gpu` selects
just them. Importing this module imports no CuPy.
"""

import functools
import importlib.util


@functools.cache
def cuda_unavailable_reason():
    """None where CuPy imports and sees a CUDA device, else why not (a skip reason)."""
    if importlib.util.find_spec("cupy") is None:
        return "needs CuPy (pip install -e .[gpu]): not installed"
    try:
        import cupy

        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as error:  # a driver or runtime error means no usable device
        return f"needs a CUDA device: CuPy could not open one ({type(error).__name__}: {error})"
    if count == 0:
        return "needs a CUDA device: CuPy sees none"
    return None
