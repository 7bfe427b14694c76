"""Seed API: asynchronous execution (seed §3.2.2's task handles at graph level):
ExecutableGraph.execute_async() -> TaskHandle, TaskGroup.

One worker thread per ExecutableGraph runs its programs in the order they were started,
while Python goes on (the kernels, BLAS and MPI waits release the interpreter lock).
An MPI rank's program may run off the main thread only when MPI was initialised with
MPI_THREAD_MULTIPLE (mpi4py asks for it): with less, execute_async runs the program at
once and returns a completed handle. While a program runs or waits:
- bind_input / bind_output_grad copy the array and bind it just before the next
  program starts (the running one never sees it: no torn input);
- get_output, get_parameter_grad, init/load/save_parameters, clear_buffers raise.
"""

from __future__ import annotations

import threading
import weakref
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

import numpy as np

# every runner with programs in flight, so that nt.shutdown() can wait for them
LIVE_RUNNERS = weakref.WeakSet()


class TaskHandle:
    """One started program: wait(), is_complete(), result() (raises the rank's error)."""

    def __init__(self, future: Future, what: str):
        self.future, self.what = future, what

    def wait(self, timeout=None) -> bool:
        """Block until the program ends (or `timeout` seconds pass); True if it ended."""
        done, _ = wait([self.future], timeout)
        return bool(done)

    def is_complete(self) -> bool:
        return self.future.done()

    def result(self, timeout=None) -> None:
        """Wait, then raise the error the program raised on this rank, if any."""
        return self.future.result(timeout)

    def __repr__(self) -> str:
        state = "complete" if self.is_complete() else "running"
        return f"TaskHandle({self.what}, {state})"


class TaskGroup:
    """Handles waited for together."""

    def __init__(self, handles=()):
        self.handles = []
        for handle in handles:
            self.add(handle)

    def add(self, handle: TaskHandle) -> TaskHandle:
        if not isinstance(handle, TaskHandle):
            raise TypeError(f"TaskGroup.add: expected a TaskHandle, got {handle!r}")
        self.handles.append(handle)
        return handle

    def wait_all(self) -> None:
        """Wait for every handle; raise the first error (in the order they were added)."""
        for handle in self.handles:
            handle.wait()
        for handle in self.handles:
            handle.result()

    def wait_any(self) -> int:
        """Wait until one handle is complete; its index in the group."""
        if not self.handles:
            raise ValueError("TaskGroup.wait_any: the group is empty")
        wait([h.future for h in self.handles], return_when=FIRST_COMPLETED)
        return next(i for i, h in enumerate(self.handles) if h.is_complete())

    def __len__(self) -> int:
        return len(self.handles)


def threads_allowed(world) -> bool:
    """May this rank's program run on a worker thread?"""
    if world.runs_every_rank or not world.executes:
        return True
    from mpi4py import MPI   # an MPI world: mpi4py is loaded already
    return MPI.Query_thread() >= MPI.THREAD_MULTIPLE


class AsyncRunner:
    """Runs an ExecutableGraph's programs in order on one worker thread."""

    def __init__(self, executable):
        self.executable = executable
        self.pool = None
        self.handles = []
        self.pending = {}            # tensor name -> array bound before the next program
        self.lock = threading.Lock()
        # the runners of graphs sharing tensors with this one (share_parameters): their
        # programs and this one's run in the order started, and while one runs the
        # shared tiles are neither bound nor read here
        self.peers = []

    def running_graphs(self) -> list:
        """Names of this graph and the graphs sharing tensors with it that still run."""
        return [runner.executable.graph.name for runner in [self, *self.peers]
                if any(not handle.is_complete() for handle in runner.handles)]

    def busy(self) -> bool:
        return bool(self.running_graphs())

    def refuse_while_running(self, caller):
        running = self.running_graphs()
        if running:
            shares = "" if running[0] == self.executable.graph.name else \
                f" (it shares tensors with graph {self.executable.graph.name!r})"
            raise RuntimeError(f"{caller}: a program of graph {running[0]!r} is running"
                               f"{shares}; wait for its TaskHandle (or synchronize()) first")

    def bind(self, name, array):
        cg = self.executable.cg
        if not self.busy():
            cg.bind_data(name, array)
            return
        tensor = cg.graph.get_tensor(name)
        array = cg._check_array(tensor, array, tensor.shape, name)   # errors now, not later
        with self.lock:
            self.pending[name] = np.array(array, copy=True)

    def take_pending(self):
        cg = self.executable.cg
        with self.lock:
            pending, self.pending = self.pending, {}
        for name, array in pending.items():
            cg.bind_data(name, array)

    def run(self, phases, before=()):
        for handle in before:     # the sharing graphs' programs started earlier
            handle.wait()
        self.take_pending()
        self.executable.cg.execute(phases=phases)

    def start(self, phases, what, background=False) -> TaskHandle:
        """Run `phases` after the programs already started (on the worker thread if
        `background` and allowed, else now); a handle on it."""
        before = [handle for runner in self.peers for handle in runner.handles]
        if not background or not threads_allowed(self.executable.cg.world):
            self.wait_all()
            future = Future()
            try:
                self.run(phases, before)
                future.set_result(None)
            except BaseException as error:   # noqa: BLE001 - the handle re-raises it
                future.set_exception(error)
            return TaskHandle(future, what)
        if self.pool is None:
            self.pool = ThreadPoolExecutor(1, thread_name_prefix="nntile-execute")
        handle = TaskHandle(self.pool.submit(self.run, phases, before), what)
        self.handles.append(handle)
        LIVE_RUNNERS.add(self)
        return handle

    def wait_all(self) -> None:
        """Wait for every started program; raise the first error."""
        handles, self.handles = list(self.handles), []
        for handle in handles:
            handle.wait()
        for handle in handles:
            handle.result()
