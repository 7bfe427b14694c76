"""A rank's program as segments for CUDA-graph replay (plan/segments.py): device runs
between host points, what each reads and writes, which EXECs hold runtime scalars; a
stand-in capture (tests/stand_in_device.py) replays training steps from the kernel
calls of the first and equals executing them. Plain pytest."""

import numpy as np
import pytest

import nntile_spmd as nt
from nntile_spmd.models import mlp
from nntile_spmd.plan.instructions import Exec, Free, Recv, Send
from nntile_spmd.plan.segments import DEVICE, HOST, program_segments, segment_summary
from nntile_spmd.train import add_optimizer
from stand_in_device import StandInGraphs, stand_in_device

pytestmark = pytest.mark.mpi_skip
TILES = nt.TilingStrategy.manual({"x": [7, 5], "h1": [11, 5]})


def mlp_graph():
    model = mlp.build_mlp([20, 30, 10], batch=12, dtype="fp64")
    add_optimizer(model.graph, model.params, model.grads, "adamw", lr=1e-2)
    return model


def test_segments_cut_the_program_at_its_mpi_points():
    plan = nt.build_plan(mlp_graph().graph, 3, TILES, "ddp")
    program = plan.program(1)
    segments = program_segments(program)
    assert [i for s in segments for i in range(s.start, s.stop)] == list(range(len(program)))
    for segment in segments:
        kinds = {type(instruction) for instruction in program[segment.start:segment.stop]}
        assert kinds <= ({Exec, Free} if segment.kind == DEVICE else {Send, Recv})
        assert segment.execs == sum(kind is Exec for kind in map(type, program[
            segment.start:segment.stop]))
    assert sum(s.kind == HOST for s in segments) == sum(
        type(instruction) in (Send, Recv) for instruction in program)
    # a received tile is read where the next device run uses it: in its captured buffer
    received = {program[s.start].key for s in segments if type(program[s.start]) is Recv}
    assert received & set().union(*(s.reads for s in segments if s.kind == DEVICE))
    assert any(s.scalar_execs for s in segments)          # the optimizer's lr, betas, ...
    assert "device segment(s) holding" in segment_summary(program)


def bind_batch(cg, model, rng):
    cg.bind_data("x", rng.standard_normal((20, 12)))
    cg.bind_data("y", rng.integers(0, 10, 12))


def test_replaying_captured_segments_equals_executing():
    model = mlp_graph()
    params = mlp.init_linear_params([20, 30, 10], np.random.default_rng(0), "fp64")
    graphs = StandInGraphs()
    direct = nt.compile(model.graph, comm=nt.SimulatedWorld(1), tiling=TILES,
                        device=stand_in_device())
    replayed = nt.compile(model.graph, comm=nt.SimulatedWorld(1), tiling=TILES,
                          device=graphs.device())
    for cg in (direct, replayed):
        for name, value in params.items():
            cg.bind_data(name, value)
    rngs = [np.random.default_rng(1), np.random.default_rng(1)]
    for step in range(3):
        for cg, rng in zip((direct, replayed), rngs):
            bind_batch(cg, model, rng)
            cg.set_scalar("lr", 1e-2 / (step + 1))   # a schedule: captured params go stale
        direct.execute()
        if step == 0:
            replayed.execute()                          # the capture
            graphs.capturing = False
        else:
            segments = graphs.replay(replayed.plan.program(0),
                                     replayed.resolved_program(None, 0))
            assert segments >= 1
    for name in ["w1", "b1", "w2", "b2", "loss"]:
        np.testing.assert_array_equal(replayed.get_output(name), direct.get_output(name),
                                      err_msg=name)
