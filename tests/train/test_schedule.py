"""The cosine learning-rate schedule with linear warm-up (train/schedule.py)."""

import math

import pytest
from train_helpers import make_trainer

from nntile_spmd.train.schedule import CosineSchedule


def test_warmup_rises_linearly_to_the_peak():
    schedule = CosineSchedule(lr=1e-3, total=100, warmup=10)
    assert schedule(0) == pytest.approx(1e-4)
    assert schedule(4) == pytest.approx(5e-4)
    assert schedule(9) == pytest.approx(1e-3)
    assert schedule(10) == pytest.approx(1e-3)      # decay starts from the peak


def test_cosine_decays_to_min_lr_and_stays_there():
    schedule = CosineSchedule(lr=1.0, total=110, warmup=10, min_lr=0.1)
    assert schedule(60) == pytest.approx(0.1 + 0.9 * 0.5)            # halfway: cos(pi/2) = 0
    assert schedule(35) == pytest.approx(0.1 + 0.45 * (1 + math.cos(math.pi / 4)))
    assert schedule(110) == pytest.approx(0.1)
    assert schedule(10_000) == pytest.approx(0.1)
    values = [schedule(step) for step in range(10, 111)]
    assert all(a >= b for a, b in zip(values, values[1:]))          # monotone decay


def test_no_warmup_starts_at_the_peak():
    schedule = CosineSchedule(lr=2.0, total=4)
    assert [schedule(s) for s in range(5)] == pytest.approx([2.0, 1.0 + 2 ** -0.5, 1.0,
                                                             1.0 - 2 ** -0.5, 0.0])


def test_warmup_equal_to_total_never_decays():
    schedule = CosineSchedule(lr=1.0, total=5, warmup=5)
    assert schedule(4) == pytest.approx(1.0)
    assert schedule(5) == 0.0


@pytest.mark.parametrize("kwargs", [dict(total=0), dict(total=5, warmup=6),
                                    dict(total=5, warmup=-1), dict(total=5, min_lr=2.0)])
def test_bad_arguments_raise(kwargs):
    with pytest.raises(ValueError, match="CosineSchedule"):
        CosineSchedule(lr=1.0, **kwargs)


def test_negative_step_raises():
    with pytest.raises(ValueError, match="step"):
        CosineSchedule(lr=1.0, total=5)(-1)


def test_trainer_applies_the_schedule_through_the_runtime_scalar(data):
    schedule = CosineSchedule(lr=5e-2, total=4, warmup=2, min_lr=1e-3)
    scheduled = make_trainer(lr_schedule=schedule, lr=5e-2)
    manual = make_trainer(lr=5e-2)
    constant = make_trainer(lr=5e-2)
    losses = scheduled.fit(data, 4)
    expected = []
    for step in range(4):
        manual.cg.set_scalar("lr", schedule(step))
        expected.append(manual.train_step(manual.micro_batches(data, step)))
    assert [entry["lr"] for entry in scheduled.history] == [schedule(s) for s in range(4)]
    assert scheduled.cg.get_scalar("lr") == schedule(3)
    assert losses == expected                       # same rates, same arithmetic
    assert constant.fit(data, 4)[1:] != losses[1:]  # and the rates did change something
