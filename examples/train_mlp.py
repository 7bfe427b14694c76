"""Train an MLP classifier on scikit-learn's handwritten digits under any preset.

    mpiexec -n 3 python examples/train_mlp.py --strategy fsdp
    python examples/train_mlp.py --strategy tp --simulate 3      # 3 ranks in one process
    mpiexec -n 2 python examples/train_mlp.py --checkpoint-dir ckpt --checkpoint-every 50 \
        --keep-last 2 --resume      # continues from the latest checkpoint in ckpt/, if any

The 8x8 digits (1,797 images, bundled with scikit-learn, no download) are
standardized with the training split's statistics and split 80/20 (fixed seed).
Every rank runs this script; rank 0 prints. The last stdout line is one JSON
object: strategy, ranks, final_loss, test_accuracy, step_time_ms,
peak_bytes_per_rank (planned, per rank), bytes_sent_per_step (planned, all
ranks) and resumed_from_step (0 unless --resume found a checkpoint). The run
fails (exit code 1) when test accuracy is below --target.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # run from a checkout

import nntile_spmd as nt  # noqa: E402
from nntile_spmd.models import build_mlp  # noqa: E402
from nntile_spmd.train import (Trainer, add_checkpoint_args, checkpoint_options,  # noqa: E402
                               resume_path)
from nntile_spmd.train.cli import DefaultsHelpFormatter, add_device_arg, report, run_summary  # noqa: E402

STRATEGIES = ("single", "ddp", "fsdp", "tp")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=DefaultsHelpFormatter)
    parser.add_argument("--strategy", choices=STRATEGIES, default="fsdp")
    parser.add_argument("--steps", type=int, default=300, help="optimizer steps")
    parser.add_argument("--batch", type=int, default=60, help="samples per optimizer step")
    parser.add_argument("--accumulation", type=int, default=1,
                        help="micro-batches per step (gradient accumulation)")
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--dtype", choices=("fp32", "fp64"), default="fp32")
    parser.add_argument("--optimizer", choices=("adam", "adamw", "sgd"), default="adam")
    parser.add_argument("--hidden", type=int, nargs="+", default=[128],
                        help="hidden layer sizes")
    parser.add_argument("--tile-bytes", type=int, default=16384,
                        help="auto tiling target bytes per tile")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--deterministic", action="store_true",
                        help="sum over tiles in tile order: bitwise the same on any ranks")
    parser.add_argument("--target", type=float, default=0.95,
                        help="fail unless test accuracy reaches this")
    parser.add_argument("--simulate", type=int, default=0, metavar="N",
                        help="run N simulated ranks in this process instead of MPI")
    add_device_arg(parser)
    parser.add_argument("--log", default=None, help="JSON-lines log of every step (rank 0)")
    parser.add_argument("--checkpoint", default=None, help="save a checkpoint here at the end")
    parser.add_argument("--progress", action="store_true", help="tqdm progress bar on rank 0")
    add_checkpoint_args(parser)
    return parser.parse_args(argv)


def load_data(seed=0, dtype=np.float32) -> dict:
    """Digits split 80/20 (stratified, fixed): x (64, samples) F-ordered, y int64 labels."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    features, labels = load_digits(return_X_y=True)
    x_train, x_test, y_train, y_test = train_test_split(
        features, labels, test_size=0.2, random_state=seed, stratify=labels)
    mean, std = x_train.mean(axis=0), x_train.std(axis=0)
    std[std == 0] = 1.0                      # a few border pixels are always blank

    def columns(x):   # samples become the trailing (batch) dim: (64, samples)
        return np.asfortranarray(((x - mean) / std).T.astype(dtype))

    return {"x_train": columns(x_train), "y_train": y_train.astype(np.int64),
            "x_test": columns(x_test), "y_test": y_test.astype(np.int64)}


def make_trainer(args, comm):
    """Model + optimizer + compiled plan for `args` on `comm`."""
    model = build_mlp([64, *args.hidden, 10], args.batch, dtype=args.dtype,
                      accumulation=args.accumulation)
    hyper = {"lr": args.lr} if args.optimizer != "sgd" else {"lr": args.lr, "momentum": 0.9}
    trainer = Trainer(model, args.optimizer, comm=comm, distribution=args.strategy,
                      tiling=nt.TilingStrategy.auto(target_tile_bytes=args.tile_bytes),
                      seed=args.seed, log_path=args.log, progress=args.progress,
                      compile_args={"deterministic": getattr(args, "deterministic", False)},
                      **checkpoint_options(args), **hyper)
    trainer.bind_params(model.init_params(np.random.default_rng(args.seed)))
    if resume_path(args) is not False:
        trainer.resume(resume_path(args))    # --steps counts from step 0, resumed or not
    trainer.resumed_from = trainer.step
    return trainer


def run(args) -> dict:
    comm = nt.SimulatedWorld(args.simulate) if args.simulate else None
    data = load_data(args.seed, np.float32 if args.dtype == "fp32" else np.float64)
    trainer = make_trainer(args, comm)
    losses = trainer.fit({"x": data["x_train"], "y": data["y_train"]},
                         max(0, args.steps - trainer.step)) or [float("nan")]
    result = trainer.evaluate(data["x_test"], data["y_test"])
    if args.checkpoint:
        trainer.save(args.checkpoint)
    trainer.close()
    return run_summary(trainer, args.strategy, losses, result,
                       resumed_from_step=trainer.resumed_from)


def main(argv=None):
    args = parse_args(argv)
    report(args, run(args))


if __name__ == "__main__":
    main()
