"""Runtime layer: CUDA events per tile buffer, for CUDA-aware MPI (which reads and writes
device buffers off the stream the kernels are queued on).

Kernel launches return before the kernels run, so MPI may touch a device buffer only
when the queued kernels allow it: a send waits for the kernel that last wrote its
buffer, a receive for every queued kernel that reads or writes the buffer it lands in
(a spare tile reused for it may still be an input of a queued kernel). One event is
recorded after each kernel; waiting on one event leaves the kernels queued after it
running, where a whole-stream synchronize would drain them all.

Buffers are known by identity, and every buffer a recorded kernel used is referenced
here until its event completes: its memory cannot return to CuPy's pool and be handed
to a receive buffer while a queued kernel still reads it. A receive buffer never seen
(fresh from the pool, whose memory a queued kernel's temporary may have used) waits
for the latest kernel; a send buffer never seen was written before this execute and
waits for the event recorded when the execute started. Imports no CuPy: the device's
array module is passed in (tests use tests/stand_in_device.py).
"""

from __future__ import annotations

from typing import NamedTuple

# Completed entries are dropped every this many records (each query of an event is a driver call),
# so buffers freed for good go back to the pool. A dropped buffer later used for a
# receive waits for the latest kernel, as unknown memory does: safe, at worst a longer
# wait than its own last kernel's.
SWEEP_EVERY = 64


class Fence(NamedTuple):
    """A buffer (kept alive, so its id stays its own) and the event after a kernel on it."""
    buffer: object
    event: object


class KernelFences:
    """Events of one execute's kernels, by the buffers they read and wrote."""

    def __init__(self, xp):
        self.cuda = xp.cuda
        self.start = self.latest = self.record()   # the work queued before this execute
        self.last_write = {}    # id(buffer) -> Fence after the kernel that wrote it
        self.last_use = {}      # id(buffer) -> Fence after the last kernel using it
        self.records = 0

    def record(self):
        event = self.cuda.Event(disable_timing=True)
        event.record()
        return event

    def after_kernel(self, arrays, written):
        """A kernel on `arrays` (inputs and outputs) writing `written` was queued."""
        event = self.latest = self.record()
        for array in arrays:
            self.last_use[id(array)] = Fence(array, event)
        for array in written:
            self.last_write[id(array)] = Fence(array, event)
        self.records += 1
        if self.records % SWEEP_EVERY == 0:
            self.sweep()

    def after_write(self, array):
        """A copy into `array` was queued (a PREFETCH): a kernel for the rules above."""
        self.after_kernel((array,), (array,))

    def before_send(self, array):
        """Block until the kernel that wrote `array` has finished."""
        entry = self.last_write.get(id(array))
        (self.start if entry is None else entry.event).synchronize()

    def before_recv(self, buffer):
        """Block until no queued kernel reads or writes `buffer`."""
        entry = self.last_use.get(id(buffer))
        (self.latest if entry is None else entry.event).synchronize()

    def sweep(self):
        """Forget the buffers whose last kernel has finished (their memory may go back)."""
        for table in (self.last_write, self.last_use):
            for key in [key for key, fence in table.items() if fence.event.done]:
                del table[key]
