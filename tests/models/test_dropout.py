"""Dropout: the op's keep rate and scaling, its mask the same on every tiling and rank
count (a function of the element's index), its gradient the same mask; in the models,
on in training steps only, off it equals today's graphs bitwise."""

import numpy as np
import pytest
from dropout_helpers import train

import nntile_spmd as nt
from nntile_kernels.generic_random import dropout as dropout_kernel
from nntile_spmd import ops
from nntile_spmd.graph.scalars import DROPOUT_ON

P = 0.25
SHAPE = [48, 40]


def dropped(tiles, comm=None, distribution="single", step=0.0, grad=False):
    """y = dropout(ones) (and d sum(y) / dx) on one tiling and world."""
    g = nt.LogicalGraph("drop")
    x = g.tensor(SHAPE, "x", dtype="fp64", requires_grad=True, external=True)
    y = ops.dropout(x, "y", p=P, seed=7, step=step).mark_output()
    wrt = nt.grad(g, y, [x]) if grad else []
    cg = nt.compile(g, comm=comm, distribution=distribution,
                    tiling=nt.TilingStrategy.manual({"x": tiles}))
    cg.bind_data("x", np.ones(SHAPE))
    cg.execute()
    return [cg.get_output("y")] + [cg.get_output(w.name) for w in wrt]


def test_keep_rate_and_scaling():
    (y,) = dropped([48, 40])
    kept = y != 0
    # 1,920 draws: the keep rate's standard deviation is 0.0099
    assert abs(kept.mean() - (1 - P)) < 0.04
    assert np.all(y[kept] == 1 / (1 - P))


def test_the_mask_is_the_whole_tensors_on_every_tiling_and_world():
    whole = np.empty(SHAPE)
    dropout_kernel(np, np.ones(SHAPE), whole, p=P, seed=7, step=0.0)
    for tiles, comm, distribution in (([48, 40], None, "single"), ([7, 9], None, "single"),
                                      ([16, 8], nt.SimulatedWorld(3), "fsdp"),
                                      ([5, 40], nt.SimulatedWorld(2), "ddp")):
        y, dx = dropped(tiles, comm, distribution, grad=True)
        assert np.array_equal(y, whole), (tiles, distribution)
        assert np.array_equal(dx, whole), (tiles, distribution)   # backward: the same mask


def test_the_mask_changes_with_the_step_and_is_the_same_again_for_it():
    (first,), (again,), (second,) = dropped([16, 8]), dropped([16, 8]), \
        dropped([16, 8], step=1.0)
    assert np.array_equal(first, again) and not np.array_equal(first, second)


def test_bad_rates_are_refused_when_added():
    g = nt.LogicalGraph("drop")
    x = g.tensor([4], "x", dtype="fp32")
    with pytest.raises(ValueError, match="dropout.*p=1.0 must be in"):
        ops.dropout(x, "y", p=1.0, seed=0)


@pytest.fixture(scope="module")
def runs():
    """Two training steps of GPT-2 with its dropout, and without."""
    return train(), train(dropout=False)


def check_training_drops(run, plain_run):
    (losses, after, trainer), (plain_losses, _, plain) = run, plain_run
    assert losses[0] != plain_losses[0]   # the same weights and batch: only dropout differs
    assert trainer.cg.get_scalar(DROPOUT_ON) == 0.0   # off again after the step
    # the forward-only execute after training runs without dropout: the plain graph's
    # forward on the same weights
    for name, value in trainer.get_params().items():
        plain.cg.bind_data(name, value)
    plain.cg.execute(phases="forward")
    assert after == float(plain.cg.get_output("loss"))


def test_training_steps_drop_and_everything_else_does_not(runs):
    check_training_drops(*runs)


def test_llama_attention_dropout():
    check_training_drops(train("llama"), train("llama", dropout=False))


def test_switched_off_it_is_todays_graph_bitwise(runs):
    """Outside a training step a graph built with dropout computes what one built without
    it does, bitwise: the loss and every gradient, on the same weights and batch."""
    (_, _, trainer), (_, _, plain) = runs
    weights = plain.get_params()
    results = []
    for cg in (trainer.cg, plain.cg):
        for name, value in weights.items():
            cg.bind_data(name, value)
        cg.execute(phases=("forward", "backward"))
        results.append({name: cg.get_output(name) for name in
                        ["loss"] + [g.name for g in plain.model.grads]})
    assert all(np.array_equal(results[0][name], value) for name, value in results[1].items())
    assert any(np.any(value != 0) for value in results[1].values())


def test_the_same_run_on_other_tilings_and_worlds(runs):
    (losses, _, _), _ = runs
    other, _, _ = train(comm=nt.SimulatedWorld(3), distribution="fsdp",
                        tiles={"input_ids": [5, 2]})
    np.testing.assert_allclose(other, losses, rtol=1e-12)


def test_recomputed_blocks_draw_the_same_masks(runs):
    """Backward recomputing a block's activations runs its dropout again: the same masks,
    bitwise the same losses."""
    (losses, _, _), _ = runs
    assert train(recompute=True)[0] == losses
