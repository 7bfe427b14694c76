"""Plan layer: replay a plan's programs with a latency/bandwidth/compute cost model
to predict one execute's time per rank, for world sizes far beyond this machine.
"""

from __future__ import annotations

from collections import defaultdict, deque
from dataclasses import dataclass

from .instructions import Exec, Recv, Send


@dataclass(frozen=True)
class CostModel:
    """Seconds per FLOP, per message and per byte; a fixed cost per task."""

    flops_per_second: float = 50e9
    latency_s: float = 5e-6
    bandwidth_bytes_per_s: float = 10e9
    task_overhead_s: float = 5e-6

    def message_time(self, nbytes: int) -> float:
        return self.latency_s + nbytes / self.bandwidth_bytes_per_s


def predict_step_time(plan, model: CostModel = CostModel(), phases=None) -> list:
    """Predicted seconds each rank needs for one execute (sends are asynchronous;
    a RECV waits until its message has arrived)."""
    programs = plan.programs(phases)
    clocks = [0.0] * plan.nranks
    positions = [0] * plan.nranks
    in_flight = defaultdict(deque)          # (source, target, tag) -> arrival times
    link_free = defaultdict(float)          # (source, target) -> time the link is free
    unfinished = set(range(plan.nranks))
    while unfinished:
        progressed = False
        for rank in sorted(unfinished):
            program = programs[rank]
            while positions[rank] < len(program):
                instruction = program[positions[rank]]
                kind = type(instruction)
                if kind is Recv:
                    arrivals = in_flight[(instruction.peer, rank, instruction.tag)]
                    if not arrivals:
                        break
                    clocks[rank] = max(clocks[rank], arrivals.popleft())
                elif kind is Send:
                    link = (rank, instruction.peer)
                    start = max(clocks[rank], link_free[link])
                    link_free[link] = start + model.message_time(instruction.nbytes)
                    in_flight[(rank, instruction.peer, instruction.tag)].append(link_free[link])
                elif kind is Exec:
                    clocks[rank] += model.task_overhead_s + \
                        instruction.flops / model.flops_per_second
                positions[rank] += 1
                progressed = True
            if positions[rank] == len(program):
                unfinished.discard(rank)
        if not progressed and unfinished:
            raise RuntimeError("cost model replay found no progress (a plan bug)")
    return clocks
