"""The simulator: exact replay arithmetic on a hand-checked plan, the calibration
fit, the machine file, and the command line."""

import json
import os
import types

import numpy as np
import pytest

import nntile_spmd as nt
from nntile_spmd.plan.distribution import TileDistribution
from nntile_spmd.plan.instructions import Recv
from nntile_spmd.plan.plan import build_plan
from nntile_spmd.simulate import MachineModel, predict, simulate
from nntile_spmd.simulate.__main__ import main as simulate_main
from nntile_spmd.simulate.calibrate import fit_rates, measure_ops, ping_pong
from nntile_spmd.simulate.machine import FUSED
from nntile_spmd.simulate.shared_core import replayed_switches, switch_penalty
from nntile_spmd.simulate.speed import kernel_speed, task_ratios
from nntile_spmd.simulate.turns import CoreScheduler, measure_turn
from nntile_spmd.simulate.workloads import gpt2_workload, mlp_workload

GELU_A, GELU_B = 1e-3, 1e-6        # seconds per task, per FLOP
# ranks beyond the cores share them, bound to one each; a waiting rank polls as long
# as it waits (the tests' tasks take seconds: the runtime's poll_s is milliseconds)
MACHINE = MachineModel(cores=2, task_overhead_s=0.0, latency_s=0.5,
                       bandwidth_bytes_per_s=8.0, core_sharing="bound", poll_s=float("inf"),
                       op_types={"gelu": {"1": [GELU_A, GELU_B], "2": [GELU_A, GELU_B]}})


def one_message_plan():
    """x [4] in two tiles, x[1] on rank 1; y = gelu(x) on rank 0: one 8-byte message."""
    g = nt.LogicalGraph("one_message")
    x = g.tensor([4], "x", "fp32", external=True)
    nt.ops.gelu(x, "y").mark_output()
    return build_plan(g, 2, nt.TilingStrategy.manual({"x": [2]}),
                      {"x": TileDistribution.custom([0, 1]), "y": TileDistribution.on_rank(0)})


def test_replay_adds_tasks_and_the_message_as_the_model_says():
    plan = one_message_plan()
    prediction = predict(plan, MACHINE, ranks_per_node=1)     # the ranks on two nodes
    tasks = [i for i in plan.program(0) if type(i).__name__ == "Exec"]
    assert len(tasks) == 2 and all(t.flops for t in tasks)
    task_s = [GELU_A + GELU_B * t.flops for t in tasks]
    message_s = 0.5 + 8 / 8.0                  # latency + 8 bytes at 8 B/s
    # rank 1 sends at time 0; rank 0 computes its own tile, then waits for the other;
    # rank 1 is done when rank 0 has received its message (the executor's end
    # completes every send)
    assert prediction.finish_s[1] == pytest.approx(max(task_s[0], message_s))
    assert prediction.step_s == pytest.approx(max(task_s[0], message_s) + task_s[1])
    assert prediction.busy_s == pytest.approx([sum(task_s), 0.0])
    kinds = [prediction.events[i].kind for i in prediction.critical_path]
    assert kinds == ["send", "wait", "exec"]   # the message is on the critical path
    assert prediction.critical_summary()["wait"] == pytest.approx(message_s - task_s[0])
    assert prediction.peak_bytes == [plan.peak_bytes(0), plan.peak_bytes(1)]
    assert not prediction.uncalibrated


def test_sending_and_receiving_cost_the_ranks_cpu_time():
    """On one node the message is there after the latency; the receiver's copy and
    the sender's post are CPU time of their ranks (one thread each)."""
    plan = one_message_plan()
    send_cpu, recv_cpu = (0.25, 1 / 32), (0.125, 1 / 16)      # 8 bytes: 0.5 s, 0.625 s
    machine = MachineModel(**{**MACHINE.__dict__, "send_cpu": send_cpu,
                              "recv_cpu": recv_cpu})
    prediction = predict(plan, machine)
    task_s = [GELU_A + GELU_B * t.flops for t in plan.program(0) if type(t).__name__ == "Exec"]
    assert prediction.finish_s[1] == pytest.approx(0.5)        # rank 1 only sends
    # rank 0: its own tile, the wait for the message (there at 0.5 s), the copy,
    # the second tile; the cores are not short, so nobody slows down
    assert prediction.step_s == pytest.approx(max(task_s[0], 0.5) + 0.625 + task_s[1])
    assert prediction.busy_s[0] == pytest.approx(sum(task_s))
    kinds = [prediction.events[i].kind for i in prediction.critical_path]
    assert kinds == ["send", "wait", "recv_cpu", "exec"]
    assert prediction.critical_summary()["recv_cpu"] == pytest.approx(0.625)
    # between nodes the bytes also cross the link
    apart = predict(plan, machine, ranks_per_node=1)
    assert apart.step_s == pytest.approx(max(task_s[0], 0.5 + 8 / 8.0) + 0.625 + task_s[1])


def test_an_uncalibrated_op_type_uses_the_fallback_and_is_reported():
    prediction = predict(one_message_plan(), MachineModel())
    assert prediction.uncalibrated == {"gelu"}
    assert "uncalibrated op types" in prediction.summary()


def two_busy_ranks_plan():
    """y = gelu(x), x [4] in two tiles, one per rank: both ranks compute at once."""
    g = nt.LogicalGraph("two_busy")
    x = g.tensor([4], "x", "fp32", external=True)
    nt.ops.gelu(x, "y").mark_output()
    split = TileDistribution.custom([0, 1])
    return build_plan(g, 2, nt.TilingStrategy.manual({"x": [2]}), {"x": split, "y": split})


def test_ranks_beyond_the_cores_share_them_only_while_both_compute():
    assert MACHINE.threads_per_rank(1) == 2 and MACHINE.threads_per_rank(4) == 1
    one_core = MachineModel(**{**MACHINE.__dict__, "cores": 1})
    busy = two_busy_ranks_plan()
    task_s = GELU_A + GELU_B * busy.program(0)[-1].flops
    apart = predict(busy, one_core, ranks_per_node=1)
    together = predict(busy, one_core)              # both ranks on the one core
    assert apart.step_s == pytest.approx(task_s)
    assert together.step_s == pytest.approx(2 * task_s)
    assert together.busy_s == pytest.approx([2 * task_s, 2 * task_s])
    # one rank computes while the other only sends: the idle rank polls beside it (for
    # its send to be received, then in the step's closing collective) and halves the
    # busy one's speed, unless finished ranks ask for no core
    lonely = one_message_plan()
    first, second = [GELU_A + GELU_B * t.flops for t in lonely.program(0)
                     if type(t).__name__ == "Exec"]
    assert predict(lonely, one_core, ranks_per_node=1).busy_s[0] == \
        pytest.approx(first + second)
    assert predict(lonely, one_core).busy_s[0] == pytest.approx(2 * first + 2 * second)
    quiet = MachineModel(**{**one_core.__dict__, "finished_ranks_poll": False})
    assert predict(lonely, quiet).busy_s[0] == pytest.approx(2 * first + second)


def test_a_waiting_rank_polls_for_poll_s_then_sleeps_and_own_cores_share_nothing():
    """The rank computing alone (rank 1 only sends) on one core: rank 1 waits twice,
    for its send to be received (during rank 0's first task) and in the closing
    collective (its second), and polls for the first poll_s of each wait, at half
    speed for rank 0; unbound ranks ("node") as bound ones. With a core per rank (the
    default) nothing is shared."""
    lonely = one_message_plan()
    first, second = [GELU_A + GELU_B * t.flops for t in lonely.program(0)
                     if type(t).__name__ == "Exec"]
    poll_s = first / 2
    for sharing in ("bound", "node"):
        machine = MachineModel(**{**MACHINE.__dict__, "cores": 1, "poll_s": poll_s,
                                  "core_sharing": sharing})
        # each poll_s at half speed does poll_s / 2 of the work, the rest runs at full
        assert predict(lonely, machine).busy_s[0] == pytest.approx(first + second + poll_s)
    own = MachineModel(**{**MACHINE.__dict__, "cores": 1, "core_sharing": "own"})
    assert MachineModel().core_sharing == "own"
    assert predict(lonely, own).busy_s[0] == pytest.approx(first + second)
    assert predict(two_busy_ranks_plan(), own).busy_s == \
        pytest.approx(predict(two_busy_ranks_plan(), own, ranks_per_node=1).busy_s)
    with pytest.raises(ValueError, match="core_sharing must be one of"):
        MachineModel(core_sharing="shared")


def chain_on_one_core():
    """x -> y = gelu(x) on rank 0 -> z = gelu(y) on rank 1, one task each."""
    g = nt.LogicalGraph("chain")
    x = g.tensor([2], "x", "fp32", external=True)
    y = nt.ops.gelu(x, "y")
    nt.ops.gelu(y, "z").mark_output()
    return build_plan(g, 2, nt.TilingStrategy.manual({"x": [2]}),
                      {"x": TileDistribution.on_rank(0), "y": TileDistribution.on_rank(0),
                       "z": TileDistribution.on_rank(1)})


def test_a_rank_waiting_for_a_tile_polls_beside_the_one_computing_it():
    """The chain with both ranks on one core shared evenly (a machine file without
    the scheduler's turn): rank 1 polls for y while rank 0 computes it, at half
    speed; rank 0 polls until rank 1 has received y and then in the closing
    collective, while rank 1 computes z, at half speed too."""
    plan = chain_on_one_core()
    one_core = MachineModel(**{**MACHINE.__dict__, "cores": 1})
    task_s = GELU_A + GELU_B * plan.program(0)[0].flops
    message_s = 0.5                              # one node: the latency
    prediction = predict(plan, one_core)
    assert prediction.finish_s[0] == pytest.approx(2 * task_s + message_s)
    assert prediction.finish_s[1] == pytest.approx(2 * task_s + message_s + 2 * task_s)
    path = [prediction.events[i] for i in prediction.critical_path]
    assert [event.kind for event in path] == ["exec", "send", "wait", "exec"]


def three_ranks_plan():
    """y = gelu(x), x [6] in three tiles, one per rank: three ranks compute at once."""
    g = nt.LogicalGraph("three")
    x = g.tensor([6], "x", "fp32", external=True)
    nt.ops.gelu(x, "y").mark_output()
    owners = TileDistribution.custom([0, 1, 2])
    return build_plan(g, 3, nt.TilingStrategy.manual({"x": [2]}), {"x": owners, "y": owners})


def test_more_ranks_than_cores_share_the_core_they_are_bound_to():
    """Three ranks, one equal task each, on two cores: ranks 0 and 2 share core 0
    (rank r on core r mod 2, as `mpiexec -bind-to core` places them) and take twice
    as long as rank 1, alone on core 1, which then polls on its own core."""
    plan = three_ranks_plan()
    task_s = GELU_A + GELU_B * plan.program(0)[-1].flops
    prediction = predict(plan, MACHINE)
    assert prediction.finish_s == pytest.approx([2 * task_s, task_s, 2 * task_s])


def test_ranks_computing_on_one_core_take_turns():
    """The same three ranks with the scheduler's turn a third of a task: ranks 0 and
    2 alternate on core 0 (0 runs turns 1, 3, 5 and is done after 5; then it polls
    and takes its turn, but its turn ends as rank 2's begins), rank 2 is done after
    6 turns; evenly shared, both would be done after 6."""
    plan = three_ranks_plan()
    task_s = GELU_A + GELU_B * plan.program(0)[-1].flops
    turns = MachineModel(**{**MACHINE.__dict__, "core_turn_s": task_s / 3})
    prediction = predict(plan, turns)
    assert prediction.finish_s == pytest.approx([5 / 3 * task_s, task_s, 2 * task_s])


def test_a_rank_back_on_its_core_after_the_other_computed_reloads_its_caches():
    """Two ranks, one task of t each, on one core with turns of t / 2 and a switch
    penalty p: 0 runs [0, t/2]; 1 comes in after 0's work (t + p to do) and runs to t;
    0 comes back (+p) to 3t/2 and has p left; 1 (+p) to 2t, 2p left; 0 (+p) ends at
    2t + 2p; 1 (+p) ends at 2t + 5p. A turn after spinning costs nothing."""
    busy = two_busy_ranks_plan()
    task_s = GELU_A + GELU_B * busy.program(0)[-1].flops
    penalty = task_s / 20
    one_core = MachineModel(**{**MACHINE.__dict__, "cores": 1, "core_turn_s": task_s / 2,
                               "switch_penalty_s": penalty})
    assert predict(busy, one_core).finish_s == pytest.approx(
        [2 * task_s + 2 * penalty, 2 * task_s + 5 * penalty])
    scheduler = CoreScheduler(turn_s=1.0)
    scheduler.update(0.0, {"core": [0]}, {"core": [2]})
    scheduler.update(0.5, {"core": [2]}, {"core": [0]})
    scheduler.update(0.6, {"core": [0]}, {"core": [2]})    # 2 computed: 0 reloads
    scheduler.update(1.6, {"core": [0]}, {"core": [2]})    # 0's turn again: no switch
    assert scheduler.switches == {2: 1, 0: 1} and scheduler.switched_in == [2, 0]


def test_the_rank_with_the_least_cpu_runs_and_a_waiting_rank_spins_off_its_lead():
    core = CoreScheduler(turn_s=1.0, spin_share=1.0)
    core.update(0.0, {"core": [0, 2]}, {})
    assert core.holds("core", 0)                     # equal counts: the lower rank
    core.update(0.25, {"core": [0, 2]}, {})
    assert core.holds("core", 0) and core.next_change() == [1.0]   # 2 waits for the turn
    core.update(0.5, {"core": [2]}, {"core": [0]})   # 0 waits: 2 has had less CPU
    assert core.holds("core", 2)
    # 2 waits after 0.1 s; 0's message came, but 0 has had 0.5 s and 2 only 0.1: the
    # scheduler keeps running 2, which spins until it has had as much
    core.update(0.6, {"core": [0]}, {"core": [2]})
    assert not core.holds("core", 0) and core.next_change() == [pytest.approx(1.0)]
    core.update(1.0, {"core": [0]}, {"core": [2]})
    assert core.holds("core", 0) and core.cpu == {0: 0.5, 2: pytest.approx(0.5)}
    # a spin share s uses up the same lead in s times the time
    half = CoreScheduler(turn_s=1.0, spin_share=0.5)
    half.update(0.0, {"core": [0]}, {"core": [2]})
    half.update(0.4, {"core": [2]}, {"core": [0]})   # 0 had 0.4 s; 2 computes 0.1 s
    half.update(0.5, {"core": [0]}, {"core": [2]})
    assert half.next_change() == [pytest.approx(0.65)]


def test_a_rank_waiting_for_a_message_takes_its_share_of_a_shared_core():
    """The chain on one core, turns a third of a task, no latency: rank 1 waits for y,
    spinning; at the end of each of rank 0's turns it has had less CPU, so it spins
    for a turn, and y is done after 5 turns, not 3. Then rank 1 computes z: two
    turns, a turn of rank 0 (done, polling in the closing collective, it has had
    less CPU by then), the third turn: z is done at 9 turns. With a spin share near
    0 (a yield that always hands the core over) waiting costs the other nothing."""
    plan = chain_on_one_core()
    task_s = GELU_A + GELU_B * plan.program(0)[0].flops
    shared = MachineModel(**{**MACHINE.__dict__, "cores": 1, "latency_s": 0.0,
                             "core_turn_s": task_s / 3, "spin_share": 1.0})
    assert predict(plan, shared).finish_s == pytest.approx([5 / 3 * task_s, 3 * task_s])
    yielding = MachineModel(**{**shared.__dict__, "spin_share": 0.0})
    assert predict(plan, yielding).finish_s == pytest.approx([task_s, 2 * task_s], rel=1e-2)


def test_a_finished_rank_keeps_its_share_while_it_polls():
    """Rank 0 runs two tasks, rank 1 one: on one core the first tasks share it (2t
    each); then rank 1 polls in the closing collective, so rank 0's second task still
    shares the core (2t), or runs alone (t) when finished ranks do not poll."""
    g = nt.LogicalGraph("uneven")
    x = g.tensor([6], "x", "fp32", external=True)
    nt.ops.gelu(x, "y").mark_output()
    owners = TileDistribution.custom([0, 0, 1])
    plan = build_plan(g, 2, nt.TilingStrategy.manual({"x": [2]}), {"x": owners, "y": owners})
    one_core = MachineModel(**{**MACHINE.__dict__, "cores": 1})
    task_s = GELU_A + GELU_B * plan.program(1)[-1].flops
    assert predict(plan, one_core).finish_s == pytest.approx([4 * task_s, 2 * task_s])
    quiet = MachineModel(**{**one_core.__dict__, "finished_ranks_poll": False})
    assert predict(plan, quiet).finish_s == pytest.approx([3 * task_s, 2 * task_s])


def test_a_receive_without_its_send_is_reported_as_a_plan_bug():
    plan = one_message_plan()
    broken = [i for i in plan.program(0)]
    fake = types.SimpleNamespace(nranks=1, graph=plan.graph, meta=plan.meta,
                                 program=lambda rank, phases=None: broken,
                                 peak_bytes=lambda rank, phases=None: 0)
    assert any(type(i) is Recv for i in broken)
    with pytest.raises(RuntimeError, match="RECV without its SEND"):
        predict(fake, MACHINE)


def test_the_fit_recovers_known_per_task_and_per_unit_costs():
    a, b = 2e-5, 3e-9
    rows = [("gemm", tasks, work, tasks * a + work * b)
            for tasks, work in [(10, 1e7), (100, 1.2e7), (1000, 2e7)]]
    assert fit_rates(rows)["gemm"] == pytest.approx([a, b], rel=1e-6)
    # one tile size cannot separate the two: all of it is charged per unit of work
    assert fit_rates([("add", 5, 1000, 1e-3)])["add"] == pytest.approx([0.0, 1e-6])


def test_calibration_measures_every_op_of_a_step():
    workload = mlp_workload((8, 16, 4), batch=6)
    rows, tasks, outside = measure_ops(workload, 1 << 20, steps=2)
    types_measured = {row[0] for row in rows}
    assert {"gemm", "add_fiber", "adamw_step"} <= types_measured
    assert tasks == sum(row[1] for row in rows) and outside >= 0
    assert all(seconds > 0 and work > 0 for _, _, work, seconds in rows)


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"),
                    reason="binding two processes to one core needs os.sched_getaffinity "
                           "(Linux); runs on every Linux machine, CI included")
def test_the_scheduler_turn_is_measured_on_this_machine():
    # two busy processes on one core: each waits about one timer tick (1-10 ms at
    # 1000-100 Hz) for its turn
    assert 1e-4 < measure_turn(seconds=0.5) < 0.1


@pytest.mark.slow
def test_the_switch_penalty_is_measured_on_two_ranks_of_this_machine():
    """calibrate's shared-core measurement (mpiexec, two ranks, GPT-2 on a core each
    and on one core in alternate executes), and the switches the replay counts."""
    machine = MachineModel(**{**MACHINE.__dict__, "core_turn_s": 4e-3, "spin_share": 1.0})
    assert replayed_switches(machine) > 1          # the GPT-2 step waits between tasks
    if not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2:
        assert switch_penalty(machine) == 0.0      # one core: nothing to compare
        return
    # a few pairs of executes: the bound holds for any median; calibrate takes 30
    assert 0.0 <= switch_penalty(machine, launches=1, pairs=4) < 1e-3


def test_the_mpi_calibration_measures_messages_and_the_shared_core():
    """calibrate's ping-pong (two ranks under mpiexec, as `python -m
    nntile_spmd.calibrate` runs it)."""
    measured = ping_pong(repeats=20)
    assert measured["latency_s"] > 0 and measured["bandwidth_bytes_per_s"] > 0
    assert all(cost >= 0 for cost in (*measured["send_cpu"], *measured["recv_cpu"]))
    assert measured["recv_cpu"].per_byte_s > 0   # a receive copies the bytes
    assert 0.0 <= measured["spin_share"] <= 1.0


def test_fused_plans_replay_with_the_fused_rate():
    """compile(fuse=True) joins elementwise chains into one task whose op name is
    theirs joined by "+": the replay times it with the fused op type's rate, which
    the calibration measures (and reports it uncalibrated where it is not)."""
    workload = mlp_workload((8, 16, 4), batch=6)
    plan = nt.compile(workload.graph, comm=nt.SimulatedWorld(1), fuse=True).plan
    assert any("+" in i.op_name for i in plan.program(0) if type(i).__name__ == "Exec")
    assert predict(plan, MACHINE).uncalibrated >= {FUSED}
    rows, _, _ = measure_ops(workload, 1 << 20, steps=1, fuse=True)
    fused = [row for row in rows if row[0] == FUSED]
    assert fused and all(tasks > 0 and work > 0 and seconds > 0
                         for _, tasks, work, seconds in fused)
    rates = fit_rates(rows)
    calibrated = MachineModel(**{**MACHINE.__dict__, "op_types": {
        op_type: {"1": rate, "2": rate} for op_type, rate in rates.items()}})
    assert not predict(plan, calibrated).uncalibrated


def test_a_machine_at_a_speed_scales_its_cpu_costs_not_its_messages():
    machine = MachineModel(**{**MACHINE.__dict__, "task_overhead_s": 1e-6,
                              "send_cpu": (1e-6, 1e-9), "recv_cpu": (2e-6, 2e-9)})
    slower = machine.at_speed(2.0)
    assert slower.task_seconds("gelu", 100, 1) == pytest.approx(
        2 * machine.task_seconds("gelu", 100, 1))
    assert slower.send_seconds(64) == pytest.approx(2 * machine.send_seconds(64))
    assert slower.recv_seconds(64) == pytest.approx(2 * machine.recv_seconds(64))
    assert slower.message_seconds(64) == machine.message_seconds(64)
    assert machine.op_types["gelu"]["1"] == [GELU_A, GELU_B]      # a copy, not in place


def test_kernel_speed_is_the_median_weighted_by_calibrated_time():
    assert kernel_speed([]) == 1.0
    # many short tasks 1x, one long task 3x: the step's time is in the long one
    assert kernel_speed([(1.0, 1e-6)] * 10 + [(3.0, 1e-3)]) == 3.0
    assert kernel_speed([(1.0, 1e-3)] * 3 + [(5.0, 1e-3)]) == 1.0


def test_a_profiled_execute_gives_the_kernel_speed_of_the_machine():
    """Each task a profiled execute records (with the CPU time of its kernel) pairs
    with its task in the plan; against a machine file twice as slow the same
    execute ran at half the calibrated time."""
    workload = mlp_workload((8, 16, 4), batch=6)
    rates, _, _ = measure_ops(workload, 1 << 20, steps=1)
    machine = MachineModel(cores=1, op_types={
        op_type: {"1": rate} for op_type, rate in fit_rates(rates).items()})
    cg = nt.compile(workload.graph, comm=nt.SimulatedWorld(1))
    workload.bind_params(cg)
    workload.bind_batch(cg, np.random.default_rng(0))
    cg.profiling = True
    cg.execute()
    events = cg.events[0]
    tasks = [e for e in events if e[0] == "task"]
    assert len(tasks) == sum(type(i).__name__ == "Exec" for i in cg.plan.program(0))
    assert all(0 <= cpu <= end - start + 1e-3 for _, _, _, start, end, _, cpu in tasks)
    ratios = task_ratios(cg.plan, machine, 0, events, threads=1)
    assert len(ratios) == len(tasks) and all(ratio >= 0 for ratio, _ in ratios)
    speed = kernel_speed(ratios)
    assert speed > 0
    assert kernel_speed(task_ratios(cg.plan, machine.at_speed(2.0), 0, events, 1)) == \
        pytest.approx(speed / 2)


def test_machine_file_round_trip_and_unknown_fields(tmp_path):
    path = tmp_path / "machine.json"
    MACHINE.save(path)
    assert MachineModel.load(path) == MACHINE
    data = json.loads(path.read_text())
    data["flops"] = 1
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="unknown machine-model fields"):
        MachineModel.load(path)


def test_presets_on_several_ranks_replay_to_the_end():
    workload = gpt2_workload(n_layer=1, n_embd=16, n_head=2, batch=2, seq=8, vocab=11)
    for preset in ("single", "ddp", "fsdp", "tp"):
        prediction = simulate(workload.graph, 3, MACHINE, distribution=preset)
        assert prediction.step_s > 0 and len(prediction.finish_s) == 3
        assert prediction.critical_path and max(prediction.finish_s) == prediction.step_s


def test_command_line_prints_the_prediction_and_draws_the_timeline(tmp_path, capsys):
    machine = tmp_path / "machine.json"
    MACHINE.save(machine)
    png = tmp_path / "timeline.png"
    simulate_main(["--model", "mlp", "--ranks", "2", "--strategy", "fsdp",
                   "--machine", str(machine), "--timeline", str(png)])
    out = capsys.readouterr().out
    assert "predicted step" in out and "rank 1:" in out and "critical path" in out
    assert png.read_bytes()[:4] == b"\x89PNG"
    shared = float(out.split("predicted step: ")[1].split(" ms")[0])
    assert np.isfinite(shared)
    # the file's ranks share cores ("bound"); a core per rank can only be as fast or faster
    simulate_main(["--model", "mlp", "--ranks", "2", "--strategy", "fsdp",
                   "--machine", str(machine), "--core-sharing", "own"])
    own = float(capsys.readouterr().out.split("predicted step: ")[1].split(" ms")[0])
    assert 0 < own <= shared
