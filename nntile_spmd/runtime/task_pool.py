"""Runtime layer: worker threads that run the tile tasks of a rank's executor.

One pool per thread count, started on first use and kept for the life of the
process (threads are daemons): an execute does not pay for starting threads, and a
pool of T threads never runs more than T tasks at once, whatever executors share it
(a SimulatedWorld's ranks do). A task is any object with a `run()` method; it
schedules its successors itself.
"""

from __future__ import annotations

import queue
import threading

_POOLS = {}
_LOCK = threading.Lock()


class TaskPool:
    """`size` daemon threads taking tasks from one queue."""

    def __init__(self, size: int):
        if size < 1:
            raise ValueError(f"a task pool needs at least one thread, got {size}")
        self.size = size
        self.queue = queue.SimpleQueue()
        self.put = self.queue.put
        self.thread_ids = {}          # threading.get_ident() -> worker number (1..size)
        for number in range(1, size + 1):
            thread = threading.Thread(target=self.work, args=(number,), daemon=True,
                                      name=f"nntile-task-{size}-{number}")
            thread.start()

    def work(self, number):
        self.thread_ids[threading.get_ident()] = number
        get = self.queue.get
        while True:
            get().run()


def task_pool(size: int) -> TaskPool:
    """The process's pool of `size` worker threads."""
    with _LOCK:
        pool = _POOLS.get(size)
        if pool is None:
            pool = _POOLS[size] = TaskPool(size)
        return pool
