"""Train a small CNN on scikit-learn's handwritten digits under any preset.

    mpiexec -n 2 python examples/train_cnn.py --strategy fsdp
    python examples/train_cnn.py --strategy tp --simulate 3      # 3 ranks in one process

The 8x8 digits (1,797 images, bundled with scikit-learn, no download) are standardized
with the training split's statistics and split 80/20 (fixed seed), as in train_mlp.py.
The model (nntile_spmd.models.cnn): conv 3x3 (16 channels, padding 1) + relu, conv 3x3
stride 2 (32 channels) + relu, a linear classifier over the 4x4x32 features. Images
are [W, H, C, batch] tensors; --spatial-tile cuts their width and height into tiles so
the convolutions exchange halo tiles between ranks. Every rank runs this script; rank 0
prints. The last stdout line is one JSON object like train_mlp.py's. The run fails
(exit code 1) when test accuracy is below --target.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # run from a checkout

import nntile_spmd as nt  # noqa: E402
from nntile_spmd.models.cnn import DIGITS_LAYERS, ConvLayer, build_cnn  # noqa: E402
from nntile_spmd.train import Trainer  # noqa: E402
from nntile_spmd.train.cli import DefaultsHelpFormatter, add_device_arg, report, run_summary  # noqa: E402

STRATEGIES = ("single", "ddp", "fsdp", "tp")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=DefaultsHelpFormatter)
    parser.add_argument("--strategy", choices=STRATEGIES, default="fsdp")
    parser.add_argument("--steps", type=int, default=100, help="optimizer steps")
    parser.add_argument("--batch", type=int, default=60, help="samples per optimizer step")
    parser.add_argument("--lr", type=float, default=1e-2)
    parser.add_argument("--dtype", choices=("fp32", "fp64"), default="fp32")
    parser.add_argument("--channels", type=int, nargs=2,
                        default=[layer.channels for layer in DIGITS_LAYERS],
                        help="channels of the two convolutions")
    parser.add_argument("--spatial-tile", type=int, default=0,
                        help="tile width and height of the images and feature maps (0: whole)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--target", type=float, default=0.95,
                        help="fail unless test accuracy reaches this")
    parser.add_argument("--simulate", type=int, default=0, metavar="N",
                        help="run N simulated ranks in this process instead of MPI")
    add_device_arg(parser)
    parser.add_argument("--progress", action="store_true", help="tqdm progress bar on rank 0")
    return parser.parse_args(argv)


def load_images(seed=0, dtype=np.float32) -> dict:
    """Digits split 80/20 (stratified, fixed): x [8, 8, 1, samples] (W, H, C, N), y int64."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    images, labels = load_digits(return_X_y=True)
    x_train, x_test, y_train, y_test = train_test_split(
        images, labels, test_size=0.2, random_state=seed, stratify=labels)
    mean, std = x_train.mean(axis=0), x_train.std(axis=0)
    std[std == 0] = 1.0                      # a few border pixels are always blank

    def whcn(x):   # rows of 64 pixels (row-major 8x8: index 8*h + w) -> [W, H, 1, N]
        standardized = ((x - mean) / std).astype(dtype)
        return np.asfortranarray(standardized.reshape(-1, 8, 8).transpose(2, 1, 0)[:, :, None, :])

    return {"x_train": whcn(x_train), "y_train": y_train.astype(np.int64),
            "x_test": whcn(x_test), "y_test": y_test.astype(np.int64)}


def tiling(args, model):
    """Images and feature maps cut into spatial tiles (channel and batch axes left to
    auto tiling, so every preset still splits its axes), else auto tiling alone."""
    if not args.spatial_tile:
        return nt.TilingStrategy.auto(target_tile_bytes=1 << 20)
    side = args.spatial_tile
    maps = [model.x] + [t for t in model.graph.tensors()
                        if t.name.endswith(("_out", "_biased", "_act"))]
    return nt.TilingStrategy.constrained({t.name: [side, side, None, None] for t in maps},
                                         target_tile_bytes=1 << 20)


def run(args) -> dict:
    comm = nt.SimulatedWorld(args.simulate) if args.simulate else None
    data = load_images(args.seed, np.float32 if args.dtype == "fp32" else np.float64)
    layers = (ConvLayer(args.channels[0]), ConvLayer(args.channels[1], stride=2))
    model = build_cnn((8, 8, 1), layers, 10, args.batch, dtype=args.dtype)
    trainer = Trainer(model, "adam", comm=comm, distribution=args.strategy,
                      tiling=tiling(args, model), seed=args.seed, progress=args.progress,
                      lr=args.lr)
    trainer.bind_params(model.init_params(np.random.default_rng(args.seed)))
    losses = trainer.fit({"x": data["x_train"], "y": data["y_train"]}, args.steps) or \
        [float("nan")]
    result = trainer.evaluate(data["x_test"], data["y_test"])
    trainer.close()
    return run_summary(trainer, args.strategy, losses, result)


def main(argv=None):
    args = parse_args(argv)
    report(args, run(args))


if __name__ == "__main__":
    main()
