"""Simulator: how fast the machine ran a plan's kernels, against its calibration.

A shared machine does not keep the speed it was calibrated at: here the same
one-thread GPT-2 step's kernels took 15.6 ms for half a second and 21 ms the next
(docs/benchmarks.md#the-simulator). No replay can predict that, so a comparison of
predicted and measured step times also needs the speed the kernels ran at while
the step was measured, to tell the model's own error from the machine's drift.

`task_ratios` pairs each task a profiled execute recorded with its task in the
plan; `kernel_speed` is the median of measured over calibrated kernel time,
weighted by the calibrated time (where the step's time goes): 1.0 at the
calibration's speed, 1.5 on a machine running 1.5x slower.
`MachineModel.at_speed` turns it into the machine file of that moment.

A task's measured time is the CPU time of the thread that ran it where the rank
runs its kernels on one thread: a rank sharing its core with another waits out
the other's turns inside its tasks, and the replay models those turns itself.
With several threads per rank (a rank's cores are its own then) it is the wall
time, as the calibration measures it.
"""

from __future__ import annotations

from collections import defaultdict, deque

from ..plan.instructions import Exec
from .machine import op_type_of, task_work


def task_ratios(plan, machine, rank, events, threads) -> list:
    """[(measured / calibrated kernel seconds, calibrated seconds)] of each task in
    `events`, a profiled execute's events of `rank` (runtime/profile.py: ("task",
    op name, kernel, start, end, thread, cpu seconds) per task), whose kernels ran on
    `threads` threads."""
    op_types = {op.name: op.op_type for op in plan.graph.ops()}
    calibrated = defaultdict(deque)          # op name -> its tasks' seconds, in order
    for instruction in plan.program(rank):
        if type(instruction) is Exec:
            op_type = op_type_of(op_types, instruction.op_name)
            a, b = machine.rate(op_type, threads)
            calibrated[instruction.op_name].append(
                a + b * task_work(instruction, plan.meta))
    ratios = []
    for event in events:
        if event.kind != "task":
            continue
        seconds = calibrated[event.op].popleft()
        if seconds > 0:
            measured = event.cpu_s if threads == 1 else event.end - event.start
            ratios.append((measured / seconds, seconds))
    return ratios


def kernel_speed(ratios) -> float:
    """The weighted median of (ratio, weight) pairs, from every rank: how much
    slower than calibrated the kernels ran (1.0 without any)."""
    if not ratios:
        return 1.0
    ordered = sorted(ratios)
    half, reached = sum(weight for _, weight in ordered) / 2, 0.0
    for ratio, weight in ordered:
        reached += weight
        if reached >= half:
            return ratio
    return ordered[-1][0]
