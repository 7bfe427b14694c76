"""Trainer: accumulation, presets agreeing, PyTorch reference, data sharding, logs, eval,
distribution="auto"."""

import json

import numpy as np
import pytest
from train_helpers import SIZES, WORLDS, init_params, make_trainer

from nntile_spmd import SimulatedWorld
from nntile_spmd.models import build_mlp
from nntile_spmd.simulate import MachineModel
from nntile_spmd.train import BatchView, Trainer, batch_indices, bind_local
from nntile_spmd.train import cross_entropy_numpy

STEPS = 4


def curve(ranks, distribution, data, **options):
    trainer = make_trainer(ranks, distribution, **options)
    return trainer, trainer.fit(data, STEPS)


def test_loss_curves_agree_across_presets_and_rank_counts(data):
    reference_trainer, reference = curve(1, "single", data)
    reference_params = reference_trainer.get_params()
    for ranks, distribution in WORLDS[1:]:
        trainer, losses = curve(ranks, distribution, data)
        where = f"{distribution} on {ranks} ranks"
        np.testing.assert_allclose(losses, reference, rtol=1e-10, err_msg=where)
        for name, value in trainer.get_params().items():
            np.testing.assert_allclose(value, reference_params[name], rtol=1e-10, atol=1e-13,
                                       err_msg=f"{name}, {where}")


@pytest.mark.parametrize("ranks,distribution", [(1, "single"), (2, "ddp"), (3, "fsdp"),
                                                (3, "tp")])
def test_gradient_accumulation_equals_big_batch(ranks, distribution, data):
    big = make_trainer(ranks, distribution, batch=12, accumulation=1)
    small = make_trainer(ranks, distribution, batch=12, accumulation=3)
    batch = big.micro_batches(data, 0)[0]
    # gradients: one execute of 12 samples == three of 4 accumulated in place
    bind(big, batch)
    big.cg.execute(phases=["forward", "backward"])
    loss_small = 0.0
    for micro in small.micro_batches(data, 0):
        bind(small, micro)
        small.cg.execute(phases=["forward", "backward"])
        loss_small += float(small.cg.get_output("loss"))
    assert loss_small == pytest.approx(float(big.cg.get_output("loss")), rel=1e-12)
    for grad in big.model.grads:
        np.testing.assert_allclose(small.cg.get_output(grad.name), big.cg.get_output(grad.name),
                                   rtol=1e-11, atol=1e-14, err_msg=grad.name)
    # and whole training steps agree (the first step's accumulated grads included)
    small.cg.execute(phases="optimizer")
    big.cg.execute(phases="optimizer")
    small.step = big.step = 1
    np.testing.assert_allclose(small.fit(data, 3), big.fit(data, 3), rtol=1e-10)
    for name, value in big.get_params().items():
        np.testing.assert_allclose(small.get_params()[name], value, rtol=1e-10, atol=1e-13)


def bind(trainer, batch):
    for name in trainer.model.inputs:
        bind_local(trainer.cg, name, batch[name])


def test_training_matches_torch(data):
    torch = pytest.importorskip("torch")
    trainer = make_trainer(1, "single", optimizer="adamw", lr=1e-2, weight_decay=0.05)
    params = init_params()
    layers = [torch.nn.Linear(SIZES[i], SIZES[i + 1]).double() for i in range(len(SIZES) - 1)]
    with torch.no_grad():
        for index, layer in enumerate(layers, start=1):
            layer.weight.copy_(torch.tensor(params[f"w{index}"]))
            layer.bias.copy_(torch.tensor(params[f"b{index}"]))
    model = torch.nn.Sequential(layers[0], torch.nn.GELU(), layers[1])
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.05)
    for step in range(STEPS):
        batch = trainer.micro_batches(data, step)[0]
        loss = trainer.train_step([batch])
        x = torch.tensor(np.asarray(batch["x"][:, :]).T)     # torch wants (batch, features)
        y = torch.tensor(np.asarray(batch["y"][:]))
        optimizer.zero_grad()
        reference = torch.nn.functional.cross_entropy(model(x), y)
        reference.backward()
        optimizer.step()
        assert loss == pytest.approx(reference.item(), rel=1e-11)
    got = trainer.get_params()
    np.testing.assert_allclose(got["w1"], layers[0].weight.detach().numpy(), rtol=1e-10)
    np.testing.assert_allclose(got["b2"], layers[1].bias.detach().numpy(), rtol=1e-10)


def test_batch_order_is_a_function_of_seed_and_step():
    first = batch_indices(seed=3, step=5, batch=10, count=48)
    np.testing.assert_array_equal(first, batch_indices(3, 5, 10, 48))
    assert not np.array_equal(first, batch_indices(4, 5, 10, 48))
    epoch = np.concatenate([batch_indices(3, s, 10, 48) for s in range(4)])
    assert len(set(epoch.tolist())) == 40, "an epoch visits distinct samples"
    with pytest.raises(ValueError, match="smaller than one batch"):
        batch_indices(0, 0, 50, 48)


def test_batch_view_reads_only_the_requested_columns():
    array = np.arange(20.0).reshape(4, 5)
    view = BatchView(array, [4, 0, 2])
    assert view.shape == (4, 3)
    np.testing.assert_array_equal(view[1:3, 0:2], array[1:3][:, [4, 0]])
    labels = BatchView(np.arange(5), [3, 1])
    np.testing.assert_array_equal(labels[slice(1, 2)], [1])


def test_each_rank_binds_only_its_shard(data):
    trainer = make_trainer(3, "ddp")
    requested = []

    class Recording:
        shape, dtype = data["x"].shape, data["x"].dtype

        def __getitem__(self, slices):
            requested.append(slices)
            return data["x"][slices]

    bind_local(trainer.cg, "x", Recording())
    spec = trainer.cg.plan.tilings["x"]
    expected = [spec.tile_slices(c) for r in range(3) for c in trainer.cg.local_tiles("x", r)]
    assert requested == expected
    batch_slices = {s[1].start for s in requested}
    assert len(batch_slices) >= 3, "DDP ranks read different batch columns"


def test_log_history_and_progress(tmp_path, data):
    log = tmp_path / "train.jsonl"
    trainer = make_trainer(2, "fsdp", log_path=log)
    losses = trainer.fit(data, 3)
    trainer.close()
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [entry["step"] for entry in lines] == [1, 2, 3]
    assert [entry["loss"] for entry in lines] == losses
    assert all(entry["step_time_ms"] > 0 for entry in lines)
    assert trainer.history == lines


def test_history_keeps_the_newest_records_and_the_log_all(tmp_path, data):
    """A long run's memory stays flat: history holds history_limit records at most."""
    log = tmp_path / "train.jsonl"
    trainer = make_trainer(1, "single", log_path=log, history_limit=2)
    trainer.fit(data, 5)
    trainer.close()
    assert [entry["step"] for entry in trainer.history] == [4, 5]
    assert [json.loads(line)["step"] for line in log.read_text().splitlines()] == [1, 2, 3, 4, 5]


def test_evaluate_matches_numpy_forward(data):
    trainer = make_trainer(3, "tp")
    trainer.fit(data, 2)
    result = trainer.evaluate(data["x"][:, :30], data["y"][:30])
    logits = trainer.model.reference_forward(trainer.get_params(), data["x"][:, :30])
    np.testing.assert_allclose(result["logits"], logits, rtol=1e-10, atol=1e-12)
    assert result["accuracy"] == np.mean(logits.argmax(axis=0) == data["y"][:30])
    assert result["loss"] == pytest.approx(cross_entropy_numpy(logits, data["y"][:30], 1 / 30))


def test_wrong_number_of_micro_batches(data):
    trainer = make_trainer(1, "single", accumulation=2)
    with pytest.raises(ValueError, match="accumulation=2"):
        trainer.train_step(trainer.micro_batches(data, 0)[:1])


def test_missing_parameter_values():
    trainer = make_trainer(1, "single")
    with pytest.raises(KeyError, match="b2"):
        trainer.bind_params({k: v for k, v in init_params().items() if k != "b2"})


def test_a_step_with_a_nonfinite_loss_is_skipped(data):
    """With skip_nonfinite a NaN batch changes nothing: the steps after it are bitwise
    those of a run that never saw it (gradients zeroed, Adam's state untouched)."""
    batches = [{"x": data["x"][:, :12], "y": data["y"][:12]},
               {"x": data["x"][:, 12:24], "y": data["y"][12:24]}]
    poisoned = {"x": np.full((data["x"].shape[0], 12), np.nan), "y": data["y"][:12]}
    clean = make_trainer(2, "fsdp", skip_nonfinite=True, lr=1e-2)
    expected = [clean.train_step([batch]) for batch in batches]
    skipping = make_trainer(2, "fsdp", skip_nonfinite=True, lr=1e-2)
    first = skipping.train_step([batches[0]])
    before = skipping.get_params()
    with pytest.warns(RuntimeWarning, match="training step 2: the loss is nan; the "
                      "optimizer step is skipped"):
        assert np.isnan(skipping.train_step([poisoned]))
    after = skipping.get_params()
    assert all(np.array_equal(before[name], after[name]) for name in before)
    assert [first, skipping.train_step([batches[1]])] == expected
    assert skipping.skipped == [2]


def test_distribution_auto_trains_with_the_searched_plan_as_one_rank_does(data):
    """Trainer(distribution="auto") on 2 simulated ranks: the search's first candidate
    (a fixed machine model, no calibration), the losses of `single`, and evaluation
    graphs compiled with the chosen distribution and tiling."""
    model = build_mlp(SIZES, 12, dtype="fp64")
    trainer = Trainer(model, "adam", comm=SimulatedWorld(2), distribution="auto",
                      progress=False, compile_args={"machine": MachineModel()}, lr=1e-2)
    trainer.bind_params(init_params())
    assert trainer.chosen is not None and trainer.distribution == trainer.chosen.distribution
    _, reference = curve(1, "single", data)
    np.testing.assert_allclose(trainer.fit(data, STEPS), reference, rtol=1e-10)
    result = trainer.evaluate(data["x"][:, :12], data["y"][:12])
    logits = trainer.model.reference_forward(trainer.get_params(), data["x"][:, :12])
    np.testing.assert_allclose(result["logits"], logits, rtol=1e-10, atol=1e-12)
