"""Runtime layer: a rank's executor that runs independent tile tasks on several threads.

The executor thread still walks the program in order and does everything but the
kernels: it allocates output tiles, posts and completes every MPI call (so MPI never
needs THREAD_MULTIPLE), frees tiles. An EXEC is handed to a worker thread of a
TaskPool as soon as the tasks it depends on have finished, and the walk goes on.
The dependencies come from the program, per tile:

* read after write: a task waits for the last task that wrote a tile it reads;
* write after write: a task waits for the last writer of its output, so the
  updates of one tile (gemm's K steps, partial sums, accumulating backward ops)
  land in program order and every sum is added in the same order as the serial
  executor's: results are bitwise identical;
* write after read: a task waits for the readers of the version it overwrites;
* SEND waits for the tile's last writer; a RECV that replaces a tile waits for
  every task that uses it;
* FREE of a tile that running or queued tasks still use is deferred: the tile
  leaves the table at once but its buffer is released (by the executor thread)
  only when they are done, so the store's peak is what was really held, and its
  in-order peak (storage.py) what the plan predicts.

At most MAX_IN_FLIGHT_PER_THREAD x threads tasks are issued and unfinished at
once: the walk does not run ahead allocating the outputs of the whole program.
A task whose dependencies are done and whose FLOP count is below INLINE_FLOPS runs
on the executor thread itself: handing a tiny kernel to a worker costs more than
running it.
"""

from __future__ import annotations

import threading
import time

from .executor import ExecutorOptions, RankExecutor
from .stats import FLOPS, KERNEL_S, TASKS, Event
from .task_pool import task_pool
from .thread_budget import HEAVY_FLOPS

# Below this many FLOPs a ready task runs on the executor thread: a hand-off to a
# worker costs about as much as such a kernel (docs/benchmarks.md, "Measurements
# behind code constants").
INLINE_FLOPS = HEAVY_FLOPS
# Readers lists are pruned of finished tasks once they grow past this.
PRUNE_READERS = 32
# Issued, unfinished tasks per worker thread before the walk waits: enough look-ahead
# to find independent tiles, not so much that outputs pile up in memory.
MAX_IN_FLIGHT_PER_THREAD = 4


class Task:
    """One EXEC handed to a worker: its arrays are bound when it is issued."""

    __slots__ = ("executor", "instruction", "kernel", "op", "arrays", "pending", "successors",
                 "done")

    def __init__(self, executor, instruction, kernel, op, arrays):
        self.executor, self.instruction, self.arrays = executor, instruction, arrays
        self.kernel, self.op = kernel, op     # the callable, the op id (program_index)
        self.pending = 0
        self.successors = []
        self.done = False

    def run(self):
        self.executor.run_task(self)


class ThreadedRankExecutor(RankExecutor):
    """RankExecutor whose EXECs run on `threads` worker threads (see module doc)."""

    uses_spares = False             # see storage.py: frees may be deferred

    def __init__(self, rank, program, store, transport, index, options: ExecutorOptions):
        # its EXEC handler records no kernel fences; GPU ranks run one task thread
        assert getattr(transport, "fence", None) is None, "a fenced transport runs serially"
        self.pool = task_pool(options.task_threads)
        self.max_in_flight = MAX_IN_FLIGHT_PER_THREAD * options.task_threads
        self.deferred = []      # (tasks, buffer, slot) of FREEs waiting for their users
        self.completed = 0      # tasks finished (the workers count)
        self.checked = 0        # `completed` when the deferred frees were last checked
        self.cond = threading.Condition(threading.Lock())
        self.writer = {}        # slot -> last issued task writing it
        self.readers = {}       # slot -> tasks reading it since its last write
        self.in_flight = 0      # issued tasks not finished yet
        self.waiting = False    # the executor thread sleeps on cond
        self.error = None       # the first exception a worker's kernel raised
        super().__init__(rank, program, store, transport, index, options)

    def run(self, blocking=True) -> bool:
        try:
            return super().run(blocking)
        except BaseException:
            self.abandon()      # no worker may touch a tile once the store is reset
            raise

    def abandon(self):
        """Queued tasks skip their kernels; wait for the running ones."""
        self.error = self.error or RuntimeError("the execute was abandoned")
        self.drain()
        super().abandon()

    def finish(self):
        self.drain()
        self.raise_error()
        self.release_deferred()
        super().finish()

    def release_deferred(self):
        """Release the deferred buffers whose users are all done."""
        self.checked = self.completed
        still = []
        for tasks, buffer, slot in self.deferred:
            if all(task.done for task in tasks):
                self.store.release_deferred(buffer, self.slot_spares[slot])
            else:
                still.append((tasks, buffer, slot))
        self.deferred[:] = still

    # -- waiting on tasks (executor thread) ------------------------------------------
    def drain(self, limit=0):
        """Wait until at most `limit` issued tasks are unfinished."""
        if self.in_flight <= limit:
            return
        start, cpu = time.perf_counter(), time.thread_time()
        with self.cond:
            self.waiting = True
            while self.in_flight > limit:
                self.cond.wait()
            self.waiting = False
        if self.events is not None:
            cpu = time.thread_time() - cpu   # read inside the wall interval
            self.events.append(Event("wait", "tasks", "look-ahead", start, time.perf_counter(),
                                     0, cpu))

    def wait_for(self, tasks):
        start, cpu = time.perf_counter(), time.thread_time()
        with self.cond:
            self.waiting = True
            for task in tasks:
                while not task.done:
                    self.cond.wait()
            self.waiting = False
        if self.events is not None:
            cpu = time.thread_time() - cpu   # read inside the wall interval
            self.events.append(Event("wait", "tasks", "dependency", start, time.perf_counter(),
                                     0, cpu))
        self.raise_error()

    def wait_writer(self, slot):
        task = self.writer.get(slot)
        if task is not None and not task.done:
            self.wait_for((task,))

    def wait_users(self, slot):
        """Wait for every task that reads or writes the tile in `slot`; forget them."""
        tasks = [task for task in self.readers.pop(slot, ()) if not task.done]
        writer = self.writer.pop(slot, None)
        if writer is not None and not writer.done:
            tasks.append(writer)
        if tasks:
            self.wait_for(tasks)

    def raise_error(self):
        error = self.error
        if error is not None:
            self.drain()
            raise error

    # -- handlers ----------------------------------------------------------------------
    def make_recv(self):
        do_recv, wait_users = super().make_recv(), self.wait_users
        readers, writer = self.readers, self.writer

        def do_threaded_recv(instruction, operands, blocking):
            slot, _ = operands          # the tile's slot, the consumer op's id
            if slot in writer or slot in readers:
                wait_users(slot)    # the received buffer replaces (releases) the old one
            return do_recv(instruction, operands, blocking)
        return do_threaded_recv

    def make_send(self):
        do_send, wait_writer, writer = super().make_send(), self.wait_writer, self.writer

        def do_threaded_send(instruction, operands, blocking):
            slot, _ = operands
            if slot in writer:
                wait_writer(slot)
            return do_send(instruction, operands, blocking)
        return do_threaded_send

    def make_free(self):
        do_free, wait_users, store = super().make_free(), self.wait_users, self.store
        readers, writer, pending_sends = self.readers, self.writer, self.pending_sends
        deferred, slots = self.deferred, self.slots

        def do_threaded_free(instruction, slot, blocking):
            if slot in writer or slot in readers:
                if pending_sends and slot in pending_sends:
                    wait_users(slot)    # its sends decide (retire_sends), as serially
                else:
                    tasks = [task for task in readers.pop(slot, ()) if not task.done]
                    task = writer.pop(slot, None)
                    if task is not None and not task.done:
                        tasks.append(task)
                    if tasks:
                        deferred.append((tasks, store.defer(slots[slot]), slot))
                        slots[slot] = None
                        return None
            return do_free(instruction, slot, blocking)
        return do_threaded_free

    def make_exec(self):
        run_inline, slots = super().make_exec(), self.slots
        # retire_sends may park or copy the old buffer: its tasks must be done first
        prepare_writes = self.make_prepare_writes(before_retire=self.wait_users)
        writer, readers, cond, put = self.writer, self.readers, self.cond, self.pool.put

        def do_threaded_exec(instruction, operands, blocking):
            if not self.in_flight and instruction.flops < INLINE_FLOPS:
                # nothing runs on the workers: every task recorded is done (the serial
                # executor's cost for a program of tiny tasks)
                if writer:
                    writer.clear()
                    readers.clear()
                if self.deferred:
                    self.release_deferred()
                if self.error is not None:
                    self.raise_error()
                return run_inline(instruction, operands, blocking)
            if self.error is not None:
                self.raise_error()
            if self.deferred and self.completed != self.checked:
                self.release_deferred()
            kernel, tile_slots, inputs, writes, op = operands
            deps = []
            for slot in inputs:
                task = writer.get(slot)
                if task is not None and not task.done:
                    deps.append(task)
            for slot in writes:
                task = writer.get(slot)
                if task is not None and not task.done:
                    deps.append(task)
                deps.extend(task for task in readers.get(slot, ()) if not task.done)
            if not deps and instruction.flops < INLINE_FLOPS:
                for slot in writes:
                    writer.pop(slot, None)
                    readers.pop(slot, None)
                with cond:              # the totals are shared with the workers
                    return run_inline(instruction, operands, blocking)
            prepare_writes(writes)
            if self.in_flight >= self.max_in_flight:
                self.drain(self.max_in_flight - 1)
                self.raise_error()
            task = Task(self, instruction, kernel, op, [slots[slot] for slot in tile_slots])
            for slot in inputs:
                users = readers.get(slot)
                if users is None:
                    readers[slot] = [task]
                else:
                    if len(users) >= PRUNE_READERS:
                        users[:] = [user for user in users if not user.done]
                    users.append(task)
            for slot in writes:
                writer[slot] = task
                readers[slot] = []
            with cond:
                self.in_flight += 1
                for dep in deps:
                    if not dep.done:
                        dep.successors.append(task)
                        task.pending += 1
                # decided under the lock: once it is released, a dep finishing on a
                # worker drops pending to 0 and queues the task itself, which read
                # here as well would run it twice (an accumulating kernel adding twice)
                issue_now = not task.pending
            if issue_now:
                put(task)
        return do_threaded_exec

    # -- worker side -------------------------------------------------------------------
    def run_task(self, task):
        instruction = task.instruction
        clock = time.perf_counter
        profiling = self.events is not None
        start = end = clock()
        # the CPU interval inside the wall one, as do_exec's; read only when profiling
        cpu = time.thread_time() if profiling else 0.0
        if self.error is None:
            try:
                task.kernel(*task.arrays, **instruction.params)
            except Exception as error:
                self.note_failure(error, instruction)
                self.error = self.error or error
            if profiling:
                cpu = time.thread_time() - cpu
            end = clock()
            if profiling:
                self.events.append(Event("task", instruction.op_name, instruction.kernel,
                                         start, end,
                                         self.pool.thread_ids.get(threading.get_ident(), 0),
                                         cpu))
        ready = []
        with self.cond:
            task.done = True
            task.arrays = None
            self.in_flight -= 1
            self.completed += 1
            totals = self.op_totals[task.op]
            totals[KERNEL_S] += end - start
            totals[TASKS] += 1
            totals[FLOPS] += instruction.flops
            for successor in task.successors:
                successor.pending -= 1
                if not successor.pending:
                    ready.append(successor)
            task.successors = None
            if self.waiting:
                self.cond.notify_all()
        for successor in ready:
            self.pool.put(successor)


def make_executor(rank, program, store, transport, index, options: ExecutorOptions):
    """The serial executor, or the threaded one when tile tasks may run side by side
    (`index`: the program's ProgramIndex)."""
    executor = ThreadedRankExecutor if options.task_threads > 1 else RankExecutor
    return executor(rank, program, store, transport, index, options)
