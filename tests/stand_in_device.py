"""A stand-in for CuPy that runs the runtime's GPU path on the CPU, with the habits of
CuPy that the runtime must cope with.

`stand_in_device()` is a Device named "cuda" whose array module is not NumPy, so the
runtime treats it as a GPU (host-staged or CUDA-aware transports, widened 16-bit
kernels, one task thread), while its tiles are NumPy arrays the CPU kernels compute on.
Its device arrays are StandInArray, a NumPy subclass with CuPy's `get` and `set`
(offloading copies through them), so a plain NumPy array is host memory, as beside
CuPy. What it copies like CuPy: `asnumpy` returns C order unless asked otherwise (as
cupy.asnumpy does, whatever the layout of the device array). What it records: every
stream synchronization, CUDA event and host-to-device copy (`xp.log`), so tests can
see who waits for what and what went to the device.

`StandInGraphs` stands in for CUDA graph capture and replay: while capturing it records
every kernel call (kernel, the tile arrays, params) of an execute; `replay` runs a
rank's program again from those calls alone, one device segment at a time
(plan/segments.py), giving the EXECs with runtime scalars their current params, as a
replay of captured graphs would.
"""

import numpy as np

import nntile_kernels
from nntile_spmd.plan.instructions import Exec
from nntile_spmd.plan.segments import DEVICE, program_segments
from nntile_spmd.runtime.device import Device


class StandInArray(np.ndarray):
    """A device array: NumPy memory the CPU kernels compute on, copied as CuPy's are."""

    def get(self, out=None, order="C"):
        if out is None:
            return np.array(self, order=order, copy=True).view(np.ndarray)
        out[...] = self
        return out

    def set(self, host):
        self[...] = host


def on_device(array):
    return array.view(StandInArray)


class StandInEvent:
    """A CUDA event: recorded after the work queued so far; here work runs at once."""

    def __init__(self, log, number):
        self.log, self.number = log, number

    def record(self, stream=None):
        self.log.append(("record", self.number))

    def synchronize(self):
        self.log.append(("wait", self.number))

    @property
    def done(self):
        return True


class StandInStream:
    def __init__(self, log):
        self.log = log

    def synchronize(self):
        self.log.append(("stream sync",))


class StandInCuda:
    """xp.cuda: the null stream and events."""

    def __init__(self, log):
        self.log, self.events = log, 0
        self.Stream = type("Stream", (), {"null": StandInStream(log)})

    def Event(self, block=False, disable_timing=False, interprocess=False):  # noqa: N802
        self.events += 1
        return StandInEvent(self.log, self.events)

    def get_current_stream(self):
        return self.Stream.null


class StandInCupy:
    """The array module of the stand-in device: NumPy, but copies to the host as CuPy."""

    def __init__(self):
        self.log = []
        self.cuda = StandInCuda(self.log)

    def __getattr__(self, name):
        return getattr(np, name)

    @staticmethod
    def asnumpy(array, stream=None, order="C", out=None, blocking=True):
        """A host copy in C order unless `order` says otherwise, like cupy.asnumpy."""
        return np.array(array, order=order, copy=True).view(np.ndarray)

    def asarray(self, array, dtype=None, order=None):
        """A device copy of a host array (cupy.asarray of a NumPy array copies)."""
        self.log.append(("to device",))
        return on_device(np.array(array, dtype=dtype, order=order or "K", copy=True))

    @staticmethod
    def empty(shape, dtype=float, order="C"):
        return on_device(np.empty(shape, dtype, order=order))

    @staticmethod
    def zeros(shape, dtype=float, order="C"):
        return on_device(np.zeros(shape, dtype, order=order))

    @staticmethod
    def empty_like(array, dtype=None, order="K"):
        return on_device(np.empty_like(array, dtype, order))


def stand_in_device() -> Device:
    """A fresh stand-in GPU device (its own log) with the CPU kernel table."""
    return Device("cuda", StandInCupy(), nntile_kernels.get_kernels("cpu"))


class StandInGraphs:
    """Records kernel calls while `capturing`; replays a program's segments from them."""

    def __init__(self):
        self.calls, self.capturing = [], True

    def device(self) -> Device:
        """A stand-in GPU whose kernels are recorded while capturing."""
        base = stand_in_device()
        return Device(base.name, base.xp, {name: self.recorded(kernel)
                                            for name, kernel in base.kernels.items()})

    def recorded(self, kernel):
        def call(*tiles, **params):
            if self.capturing:
                self.calls.append((kernel, tiles, params))
            return kernel(*tiles, **params)
        return call

    def replay(self, program, resolved) -> int:
        """Run the plan's `program` again from the captured calls, segment by segment,
        with the captured params except at the segments' scalar_execs, which take
        theirs from `resolved` (the program with the scalars' current values).
        Returns the device segments replayed. Only device work is replayed: a program
        with host points (MPI, offloading) needs its transport too."""
        positions = [p for p, instruction in enumerate(program) if type(instruction) is Exec]
        assert len(positions) == len(self.calls), "capture one execute of this program"
        ordinal, replayed = 0, 0
        for segment in program_segments(program):
            assert segment.kind == DEVICE, f"host point at {segment.start}: no transport here"
            for position in positions[ordinal:ordinal + segment.execs]:
                kernel, tiles, params = self.calls[ordinal]
                if position in segment.scalar_execs:
                    params = resolved[position].params
                kernel(*tiles, **params)
                ordinal += 1
            replayed += 1
        return replayed
