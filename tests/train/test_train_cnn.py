"""examples/train_cnn.py reaches 95 % held-out accuracy on the digits under every preset
(2 simulated ranks, images and feature maps cut into 4x4 spatial tiles, so training
exchanges halo tiles), with small, fast settings: 8 and 16 channels, 80 steps."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))

import train_cnn  # noqa: E402


@pytest.mark.parametrize("strategy", ["single", "ddp", "fsdp", "tp"])
def test_train_cnn_reaches_the_target(strategy):
    args = train_cnn.parse_args(["--strategy", strategy, "--simulate", "2", "--channels", "8",
                                 "16", "--steps", "80", "--spatial-tile", "4"])
    summary = train_cnn.run(args)
    assert summary["test_accuracy"] >= 0.95, summary
    assert summary["final_loss"] < summary["first_loss"] / 10
    assert (summary["bytes_sent_per_step"] > 0) == (strategy != "single")
