"""examples/train_cnn.py reaches 95 % held-out accuracy on the digits (80 steps, 8 and
16 channels, 2 simulated ranks), and under every preset it trains as one rank does:
the same losses and test accuracy (fp64, 3 steps of 20 samples). Under tp the images
and feature maps are also cut into 4x4 spatial tiles (windowed lowering of every conv
op in training; the presets split no spatial axis over ranks, so halo tiles stay on
their rank here: tests/runtime/test_runtime_conv.py moves them between ranks)."""

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))

import train_cnn  # noqa: E402

SMALL = ["--channels", "8", "16"]
SHORT = ["--steps", "3", "--batch", "20", "--dtype", "fp64"]   # enough to compare presets


def summary(strategy, *options, ranks=2):
    spatial = ["--spatial-tile", "4"] if strategy == "tp" else []
    return train_cnn.run(train_cnn.parse_args(["--strategy", strategy, "--simulate", str(ranks),
                                               *SMALL, *spatial, *options]))


@pytest.mark.slow
def test_train_cnn_reaches_the_target():
    result = summary("fsdp", "--steps", "80")
    assert result["test_accuracy"] >= 0.95, result
    assert result["final_loss"] < result["first_loss"] / 10
    assert result["bytes_sent_per_step"] > 0


@pytest.fixture(scope="module")
def one_rank():
    return summary("single", *SHORT, ranks=1)


@pytest.mark.parametrize("strategy", ["single", "ddp", "fsdp", "tp"])
def test_every_preset_trains_as_one_rank(strategy, one_rank):
    result = summary(strategy, *SHORT)
    for key in ("first_loss", "final_loss", "test_loss", "test_accuracy"):
        np.testing.assert_allclose(result[key], one_rank[key], rtol=1e-9, err_msg=key)
    assert (result["bytes_sent_per_step"] > 0) == (strategy != "single")
