"""gelu (exact, erf) and gelutanh (HF's gelu_new) against PyTorch in fp64 to 1e-14 on
every backend: forward against torch.nn.functional.gelu, backward against autograd.
Skipped where torch is not installed."""

import numpy as np
import pytest

from nntile_kernels import cpu, reference

torch = pytest.importorskip("torch")

# torch's name for each kernel's approximation
APPROXIMATE = {"gelu": "none", "gelutanh": "tanh"}


def backend_table(name):
    if name == "cuda":   # gpu-marked: tests/conftest.py skips it without CuPy or a device
        import cupy

        from nntile_kernels import cuda
        return cuda.KERNELS, cupy.asarray, cupy.asnumpy
    table = {"reference": reference.KERNELS, "cpu": cpu.KERNELS}[name]
    return table, np.asarray, np.asarray


def inputs():
    """A dense sweep of [-12, 12] (both tails and the kink region) plus random normals."""
    rng = np.random.default_rng(6)
    return np.concatenate([np.linspace(-12.0, 12.0, 2401), rng.standard_normal(500),
                           [0.0, -0.0, 1e-300, -1e-8, 1e-8]])


BACKENDS = ["reference", "cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(APPROXIMATE))
def test_forward_matches_torch_gelu_in_fp64(name, backend):
    table, to_device, to_host = backend_table(backend)
    x = inputs()
    y = to_device(np.full_like(x, np.nan))
    table[name](to_device(x), y)
    expected = torch.nn.functional.gelu(torch.from_numpy(x), approximate=APPROXIMATE[name])
    np.testing.assert_allclose(to_host(y), expected.numpy(), rtol=1e-14, atol=1e-14)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(APPROXIMATE))
def test_backward_matches_torch_autograd_in_fp64(name, backend):
    table, to_device, to_host = backend_table(backend)
    x = inputs()
    dy = np.random.default_rng(7).standard_normal(x.shape)
    dx = to_device(np.zeros_like(x))
    table[f"{name}_backward"](to_device(x), to_device(dy), dx)
    leaf = torch.from_numpy(x).requires_grad_()
    torch.nn.functional.gelu(leaf, approximate=APPROXIMATE[name]).backward(torch.from_numpy(dy))
    np.testing.assert_allclose(to_host(dx), leaf.grad.numpy(), rtol=1e-14, atol=1e-14)
