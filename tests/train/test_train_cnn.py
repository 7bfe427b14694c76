"""examples/train_cnn.py reaches 95 % held-out accuracy on the digits under every preset
(2 simulated ranks), with small, fast settings: 8 and 16 channels, 80 steps. Under tp
the images and feature maps are also cut into 4x4 spatial tiles (windowed lowering of
every conv op in training; the presets split no spatial axis over ranks, so halo tiles
stay on their rank here: tests/runtime/test_runtime_conv.py moves them between ranks)."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))

import train_cnn  # noqa: E402


@pytest.mark.parametrize("strategy", ["single", "ddp", "fsdp", "tp"])
def test_train_cnn_reaches_the_target(strategy):
    spatial = ["--spatial-tile", "4"] if strategy == "tp" else []
    args = train_cnn.parse_args(["--strategy", strategy, "--simulate", "2", "--channels", "8",
                                 "16", "--steps", "80", *spatial])
    summary = train_cnn.run(args)
    assert summary["test_accuracy"] >= 0.95, summary
    assert summary["final_loss"] < summary["first_loss"] / 10
    assert (summary["bytes_sent_per_step"] > 0) == (strategy != "single")
