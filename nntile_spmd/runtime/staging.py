"""Runtime layer: moving GPU tiles through a transport that only takes host memory.

The pip MPI wheels are not CUDA-aware, so a CuPy tile is copied to a host buffer
before its send (the copy synchronizes the stream, so the kernel that wrote the
tile has finished) and a receive lands in a host buffer that is uploaded when the
RECV completes. NNTILE_SPMD_CUDA_AWARE=1 (with a CUDA-aware MPI) skips staging and
fences each buffer by CUDA events instead (kernel_fences.py). Host copies keep the
tile's Fortran order (Device.to_host): MPI moves raw bytes into a Fortran buffer.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .kernel_fences import KernelFences


class StagingMeter:
    """Bytes of host staging buffers alive now, and their peak (a tracking allocator)."""

    def __init__(self):
        self.held = self.peak = 0

    def take(self, array):
        self.held += array.nbytes
        if self.held > self.peak:
            self.peak = self.held
        return array

    def give_back(self, array):
        self.held -= array.nbytes


class StagedHandle(NamedTuple):
    """A host-staged transfer: the inner transport's handle and the host buffer it uses."""

    inner: object
    host: np.ndarray


class HostStagedTransport:
    """Wraps a transport; handles carry the host buffer alongside the request."""

    def __init__(self, inner, device):
        self.inner, self.device = inner, device
        self.traffic = inner.traffic    # MPI sees the host buffers: the inner one counts
        self.staging = StagingMeter()

    def post_send(self, peer, tag, array):
        host = self.staging.take(self.device.to_host(array))
        return StagedHandle(self.inner.post_send(peer, tag, host), host)

    def wait_send(self, handle):
        self.inner.wait_send(handle.inner)
        self.staging.give_back(handle.host)

    def test_send(self, handle):
        """True once the send completed (then its host buffer is given back: the
        executor never asks again about a completed handle)."""
        done = self.inner.test_send(handle.inner)
        if done:
            self.staging.give_back(handle.host)
        return done

    def post_recv(self, peer, tag, buffer):
        host = self.staging.take(np.empty(buffer.shape, dtype=buffer.dtype, order="F"))
        return StagedHandle(self.inner.post_recv(peer, tag, host), host)

    def test_recv(self, handle):
        return self.inner.test_recv(handle.inner)

    def wait_recv(self, handle, describe):
        self.inner.wait_recv(handle.inner, describe)

    def cancel_receives(self):
        self.inner.cancel_receives()

    def finish_recv(self, handle, buffer):
        buffer[...] = self.device.xp.asarray(self.inner.finish_recv(handle.inner, handle.host))
        self.staging.give_back(handle.host)
        return buffer


class CudaAwareTransport:
    """CUDA-aware MPI: device buffers go to MPI once the kernels queued on them allow it
    (a send after the kernel that wrote its tile, a receive after every queued kernel
    using its buffer: kernel_fences.py). The executor records the events (`fence`)."""

    def __init__(self, inner, device):
        self.inner, self.device = inner, device
        self.traffic = inner.traffic
        self.fence = KernelFences(device.xp)

    def post_send(self, peer, tag, array):
        # MPI takes the buffer's raw bytes: both sides must hold Fortran-ordered tiles
        assert array.flags.f_contiguous, f"a {array.shape} tile to send is not F-ordered"
        self.fence.before_send(array)
        return self.inner.post_send(peer, tag, array)

    def post_recv(self, peer, tag, buffer):
        assert buffer.flags.f_contiguous, f"a {buffer.shape} receive buffer is not F-ordered"
        self.fence.before_recv(buffer)
        return self.inner.post_recv(peer, tag, buffer)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def wrap_transport(transport, device, cuda_aware: bool):
    """The transport to use for tiles on `device` (`cuda_aware`: MPI takes device buffers)."""
    if device.xp is np:
        return transport
    if cuda_aware:
        return CudaAwareTransport(transport, device)
    return HostStagedTransport(transport, device)
