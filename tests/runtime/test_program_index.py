"""Integer tile slots (runtime/program_index.py) and the spare lists that serve the
executors' allocations (runtime/storage.py): what moves in and out of the tile
store's dict, buffer reuse, and the peak staying the plan's."""

import numpy as np
import pytest

import nntile_spmd as nt
from nntile_spmd.plan.instructions import Exec, Free
from nntile_spmd.plan.memory import TileMeta
from nntile_spmd.runtime.program_index import build_index
from nntile_spmd.runtime.storage import TileStore


def chain(size, tile, task_threads=1):
    """x -> relu -> scale -> gelu (output): the first two results are intermediates."""
    g = nt.LogicalGraph("chain")
    x = g.tensor([size, size], "x", dtype="fp32", external=True)
    h = nt.ops.scale(nt.ops.relu(x, "h0"), "h1", 0.5)
    nt.ops.gelu(h, "y").mark_output()
    cg = nt.compile(g, comm=nt.SimulatedWorld(1), task_threads=task_threads,
                    tiling=nt.TilingStrategy.manual({"x": [tile, tile]}))
    data = np.random.default_rng(0).standard_normal((size, size)).astype(np.float32)
    cg.bind_data("x", data)
    return cg, data


def expected(data):
    h = np.maximum(data.astype(np.float64), 0) * 0.5
    from math import erf
    return h * 0.5 * (1 + np.vectorize(erf)(h / np.sqrt(2)))


def test_every_key_has_one_slot_and_intermediates_are_not_resident():
    cg, _ = chain(7, 3)                        # uneven: 3 + 3 + 1
    program = cg.plan.program(0)
    index = build_index(program, cg.device.kernels, cg.plan.meta)
    keys = {key for instruction in program if type(instruction) is Exec
            for key in instruction.keys}
    assert sorted(index.keys) == sorted(keys) and len(set(index.keys)) == len(index.keys)
    for instruction, operands in zip(program, index.operands):
        if type(instruction) is Exec:
            assert [index.keys[slot] for slot in operands[1]] == list(instruction.keys)
            assert [index.keys[slot] for slot in operands[3]] == list(instruction.writes)
            assert operands[0] is cg.device.kernels[instruction.kernel]
        elif type(instruction) is Free:
            assert index.keys[operands] == instruction.key
    resident = {index.keys[slot][0] for slot in index.resident}
    assert resident == {"x", "y"}              # h0, h1: created and freed inside
    assert [index.metas[slot] for slot in range(len(index.keys))] == \
        [cg.plan.meta[key] for key in index.keys]


@pytest.mark.parametrize("task_threads", [1, 2])
def test_store_holds_the_permanent_tiles_after_each_execute(task_threads):
    cg, data = chain(7, 3, task_threads)
    for _ in range(2):
        cg.execute()
        assert set(cg.stores[0].tiles) == set(cg.plan.permanent[0])
        np.testing.assert_allclose(cg.get_output("y"), expected(data), rtol=1e-5, atol=1e-6)
        cg.check_stats(0)                      # measured peak == planned peak


def test_freed_tiles_serve_the_next_allocations():
    """Uniform tiles: the second execute takes every buffer from the spare lists."""
    cg, data = chain(8, 2)
    cg.execute()
    store = cg.stores[0]
    fresh = []
    empty = store._empty
    store._empty = lambda *args, **kwargs: fresh.append(args) or empty(*args, **kwargs)
    cg.execute()
    tasks = sum(1 for instruction in cg.plan.program(0) if type(instruction) is Exec)
    assert fresh == [] and tasks == 3 * 16
    cg.check_stats(0)
    np.testing.assert_allclose(cg.get_output("y"), expected(data), rtol=1e-5, atol=1e-6)


def test_spares_are_trimmed_as_few_as_needed_and_counted_as_held():
    store = TileStore(np, lambda name: np.dtype(np.float32))
    small, large = TileMeta((4,), "fp32", 4, 16), TileMeta((32,), "fp32", 32, 128)
    spares_small, spares_large = store.spare_lists([((4,), "fp32"), ((32,), "fp32")])
    store.begin(program=None)
    buffers = [store.take(small, spares_small) for _ in range(3)]
    assert (store.nbytes, store.peak) == (48, 48)
    for buffer in buffers:
        store.give(buffer, spares_small)
    assert (store.nbytes, store.spare_bytes, len(spares_small)) == (0, 48, 3)
    assert store.take(small, spares_small) is buffers[-1]    # a spare, not a new array
    # 16 live + 32 spare + 128 new > peak 48: keep only what fits, 0 spare bytes here
    store.take(large, spares_large)
    assert (store.nbytes, store.spare_bytes, store.peak) == (144, 0, 144)
    store.give(store.take(small, spares_small), spares_small)
    assert store.spare_bytes == 16 and store.peak == 160
    store.trim_spare(0)
    assert store.spare_bytes == 0 and spares_small == []


def test_parked_buffers_are_held_and_their_most_at_once_is_measured():
    """A parked buffer stays counted as held but not in program order: the in-order
    peak (the plan's model) leaves it out, parked_peak bounds peak - in-order peak,
    and a parked buffer released late becomes a spare only within the in-order peak."""
    store = TileStore(np, lambda name: np.dtype(np.float32))
    small = TileMeta((4,), "fp32", 4, 16)
    (spares,) = store.spare_lists([((4,), "fp32")])
    store.begin(program=None)
    first, second = store.take(small, spares), store.take(small, spares)
    store.park(first)
    store.park(second)
    assert (store.nbytes, store.parked_bytes, store.parked_peak) == (32, 32, 32)
    store.take(small, spares)                 # the plan freed both: in program order 16
    assert (store.peak, store.in_order_peak) == (48, 32)
    store.unpark(first, spares)               # 16 live in order + 16 spare: kept
    assert (store.nbytes, store.spare_bytes, store.parked_bytes) == (32, 16, 16)
    store.unpark(second, spares)              # 16 + 32 spare > 32: trimmed to 16
    assert (store.nbytes, store.spare_bytes, store.parked_bytes) == (16, 16, 0)
    assert (store.parked_peak, store.peak, store.in_order_peak) == (32, 48, 32)
    store.drop_transient(set(), {})
    assert store.parked_bytes == 0


def test_a_tile_left_by_another_program_is_used_and_freed():
    """A tile this program creates and frees, found in the store after another program
    ran, is written in place and leaves the store at its FREE (nothing is left behind)."""
    cg, data = chain(7, 3)
    cg.execute()
    store, key = cg.stores[0], ("h0", (0, 0))
    left = store.allocate(key, cg.plan.meta[key])
    store.last_program = None                  # as after an execute of other phases
    cg.execute()
    assert key not in store.tiles and set(store.tiles) == set(cg.plan.permanent[0])
    assert store.nbytes == sum(tile.nbytes for tile in store.tiles.values())
    assert any(left is spare for spares in store.spare.values() for spare in spares)
    np.testing.assert_allclose(cg.get_output("y"), expected(data), rtol=1e-5, atol=1e-6)
