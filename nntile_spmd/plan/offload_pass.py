"""Plan layer: the offloading pass itself (Belady's rule over one rank's program);
plan/offload.py says what it does and holds the policy and the Plan hooks."""

from __future__ import annotations

import heapq
from typing import NamedTuple

from .builder import PlanError
from .instructions import Evict, Exec, Free, Prefetch, Recv, Send, key_str

NEVER = float("inf")


class Touch(NamedTuple):
    """An instruction of the program that touches a tile."""

    index: int         # its position in the program
    overwrites: bool   # it replaces the tile without reading it


def touch_lists(program) -> dict:
    """key -> [Touch] of the instructions that touch it (FREE aside), in program order."""
    touches = {}
    for index, instruction in enumerate(program):
        kind = type(instruction)
        if kind is Exec:
            read, written = set(instruction.reads), set(instruction.writes)
            for key in dict.fromkeys(instruction.keys):
                touches.setdefault(key, []).append(Touch(index, key in written and key not in read))
        elif kind is Recv:
            touches.setdefault(instruction.key, []).append(Touch(index, True))
        elif kind is Send:
            touches.setdefault(instruction.key, []).append(Touch(index, False))
    return touches


def exec_needs(instruction, resident, current_copy):
    """(tiles to prefetch, tiles the executor allocates) before an EXEC runs: every
    tile it takes that is not an output must be resident; an output it reads is
    fetched when it has an offloaded copy, else (never written yet, or overwritten)
    allocated."""
    writes = set(instruction.writes)
    fetch, new = [], []
    for key in dict.fromkeys(instruction.keys):
        if key in resident:
            continue
        if key not in writes or (key in instruction.reads and key in current_copy):
            fetch.append(key)
        else:
            new.append(key)
    return fetch, new


class OffloadWalk:
    """The state of one pass over a program: what is resident, what is current
    offloaded, the bytes held, and the Belady queue of eviction candidates."""

    def __init__(self, program, meta, permanent, rest, budget, rank, window):
        self.program, self.meta, self.permanent = program, meta, permanent
        self.budget, self.rank, self.window = budget, rank, window
        self.sending = {}      # key -> ops of other ranks its current version is sent for
        self.ops_done = set()  # ops this rank has run tasks of so far
        self.touches = touch_lists(program)
        self.cursor = dict.fromkeys(self.touches, 0)
        self.resident = set(rest)
        self.current_copy = set(permanent) - self.resident   # offloaded copy is current
        self.held = sum(meta[key].nbytes for key in rest)
        self.out, self.levels = [], []
        self.priority, self.queue = {}, []
        for key in rest:
            self.requeue(key)

    def next_use(self, key) -> float:
        """Index of the next touch that reads `key`; a touch that overwrites it first
        ranks after every read (evicting it costs no copy); permanent tiles' next use
        after the program is their first touch in the next execute."""
        touches, position = self.touches.get(key, ()), self.cursor.get(key, 0)
        if position < len(touches):
            index, overwrites = touches[position]
            return 2 * len(self.program) + index if overwrites else index
        if key in self.permanent and touches:
            return len(self.program) + touches[0].index
        return NEVER

    def requeue(self, key):
        priority = self.priority[key] = self.next_use(key)
        heapq.heappush(self.queue, (-priority, key))

    def emit(self, instruction, level):
        self.out.append(instruction)
        self.levels.append(level)

    def make_room(self, need, protected, instruction):
        """Evict furthest-next-use tiles until `need` more bytes fit the budget. A tile
        sent for an op this rank has not reached yet goes last: its receiver may not
        have posted the receive, so the send may still read it (the executor parks
        such a buffer, held beyond the plan, until the send completes)."""
        kept, sending = [], []
        while self.held + need > self.budget:
            if not self.queue:
                if not sending:
                    self.refuse(need, instruction)
                self.evict(sending.pop(0)[1])
                continue
            negative, key = heapq.heappop(self.queue)
            if key not in self.resident or self.priority.get(key) != -negative:
                continue
            if key in protected:
                kept.append((negative, key))
            elif key in self.sending and not self.sending[key] <= self.ops_done:
                sending.append((negative, key))
            else:
                self.evict(key)
        for entry in kept + sending:
            heapq.heappush(self.queue, entry)

    def evict(self, key):
        touches, position = self.touches.get(key, ()), self.cursor.get(key, 0)
        overwritten_next = position < len(touches) and touches[position].overwrites
        write_back = key not in self.current_copy and not overwritten_next
        if write_back:
            self.current_copy.add(key)
        nbytes = self.meta[key].nbytes
        self.emit(Evict(key, nbytes, write_back), self.held)
        self.resident.discard(key)
        self.held -= nbytes

    def prefetch(self, key):
        if key not in self.current_copy:
            raise PlanError(f"offloading on rank {self.rank}: tile {key_str(key)} is needed "
                            "but neither resident nor offloaded (a plan bug)")
        nbytes = self.meta[key].nbytes
        self.held += nbytes
        self.resident.add(key)
        self.emit(Prefetch(key, nbytes), self.held)

    def refuse(self, need, instruction):
        what = (f"task {instruction} of op {instruction.op_name}" if type(instruction) is Exec
                else f"{instruction}")
        raise PlanError(
            f"memory budget {self.budget} bytes on rank {self.rank} is below what {what} "
            f"needs: {self.held + need} bytes (its tiles and the receive buffers posted "
            "then); raise memory_budget")

    def touched(self, keys):
        for key in keys:
            self.cursor[key] += 1
            if key in self.resident:
                self.requeue(key)


def walk(program, meta, permanent, rest, budget, window, rank) -> OffloadWalk:
    """Insert EVICTs and demand PREFETCHes into `program` (see the module doc)."""
    state = OffloadWalk(program, meta, permanent, rest, budget, rank, window)
    positions = [i for i, instruction in enumerate(program) if type(instruction) is Recv]
    posted = min(len(positions), window)
    state.held += sum(program[p].nbytes for p in positions[:posted])
    if state.held > budget:
        state.refuse(0, program[positions[0]] if positions else "the program's start")
    received = 0
    for instruction in program:
        kind = type(instruction)
        if kind is Exec:
            missing, new = exec_needs(instruction, state.resident, state.current_copy)
            need = sum(meta[key].nbytes for key in missing + new)
            state.make_room(need, set(instruction.keys), instruction)
            for key in missing:
                state.prefetch(key)
            state.held += sum(meta[key].nbytes for key in new)
            state.resident.update(new)
            state.current_copy.difference_update(instruction.writes)
            for key in instruction.writes:
                state.sending.pop(key, None)   # a new version: nothing sends it yet
            state.ops_done.update(instruction.op_name.split("+"))   # fused: "a+b"
            state.emit(instruction, state.held)
            state.touched(dict.fromkeys(instruction.keys))
        elif kind is Send:
            if instruction.key not in state.resident:
                state.make_room(meta[instruction.key].nbytes, {instruction.key}, instruction)
                state.prefetch(instruction.key)
            state.emit(instruction, state.held)
            state.touched((instruction.key,))
            state.sending.setdefault(instruction.key, set()).add(instruction.consumer)
        elif kind is Recv:
            key = instruction.key
            received += 1
            target = min(len(positions), received + window)
            posts = sum(program[p].nbytes for p in positions[posted:target])
            replaced = meta[key].nbytes if key in state.resident else 0
            state.make_room(posts - replaced, {key}, instruction)
            state.held += posts - replaced
            posted = max(posted, target)
            state.resident.add(key)
            state.current_copy.discard(key)
            state.emit(instruction, state.held + replaced)
            state.touched((key,))
        elif kind is Free:
            state.resident.discard(instruction.key)
            state.current_copy.discard(instruction.key)
            state.held -= meta[instruction.key].nbytes
            state.emit(instruction, state.held + meta[instruction.key].nbytes)
        else:
            raise PlanError(f"offloading on rank {rank}: unexpected instruction {instruction}")
    return state


def restore_rest(state, rest):
    """End the program in the rest state: evict what should rest offloaded, bring back
    what should rest resident."""
    leftover = state.resident - state.permanent
    if leftover:
        raise PlanError(f"offloading on rank {state.rank}: transient tiles "
                        f"{sorted(map(key_str, leftover))[:4]} outlive the program")
    for key in sorted(state.resident - set(rest)):
        state.evict(key)
    for key in sorted(set(rest) - state.resident):
        state.prefetch(key)


def hoist_prefetches(out, levels, budget, distance) -> list:
    """Move each PREFETCH up to `distance` EXECs earlier while the budget holds over
    every instruction it passes (never above the EVICT that wrote its copy)."""
    moved = {}   # position of a PREFETCH -> the position it now precedes
    for position, instruction in enumerate(out):
        if type(instruction) is not Prefetch:
            continue
        nbytes, target, execs = instruction.nbytes, position, 0
        for earlier in range(position - 1, -1, -1):
            other = out[earlier]
            kind = type(other)
            if earlier in moved:
                continue
            if kind is Exec:
                if execs == distance:
                    break
                execs += 1
            if (kind in (Evict, Prefetch, Send, Recv, Free) and other.key == instruction.key) \
                    or (kind is Exec and instruction.key in other.keys) \
                    or levels[earlier] + nbytes > budget:
                break
            target = earlier
        if target < position:
            moved[position] = target
            for index in range(target, position):
                levels[index] += nbytes
    order = sorted(range(len(out)), key=lambda i: (moved[i], 0, i) if i in moved
                   else (i, 1, 0))
    return [out[i] for i in order]


def plan_offload(program, meta, permanent, rest, policy, window, rank) -> list:
    """`program` with EVICTs and PREFETCHes keeping the rank's planned device bytes
    within the policy's budget; it starts and ends with `rest` resident."""
    state = walk(program, meta, permanent, rest, policy.budget(), window, rank)
    restore_rest(state, rest)
    return hoist_prefetches(state.out, state.levels, policy.budget(),
                            policy.prefetch_distance)


def rest_set(program, meta, permanent, policy, window, rank) -> frozenset:
    """The persistent tiles resident between executes, from the all-phases program:
    start with those used first (as many as fit beside the first posted receives),
    walk the program, keep what Belady kept at its end."""
    budget = policy.budget()
    posted = [i.nbytes for i in program if type(i) is Recv][:window]
    room = budget - sum(posted)
    touches = touch_lists(program)
    by_first_use = sorted(permanent, key=lambda key: (touches[key][0].index, key_str(key))
                          if key in touches else (NEVER, key_str(key)))
    first, used = [], 0
    for key in by_first_use:
        if used + meta[key].nbytes <= room:
            first.append(key)
            used += meta[key].nbytes
    kept = walk(program, meta, permanent, first, budget, window, rank).resident & permanent
    order = {key: index for index, key in enumerate(by_first_use)}
    rest, used = [], 0
    for key in sorted(kept, key=order.__getitem__):
        if used + meta[key].nbytes <= room:
            rest.append(key)
            used += meta[key].nbytes
    return frozenset(rest)
