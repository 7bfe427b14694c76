"""Train layer: what the examples share: the command-line options of the device and of
checkpointing, and the summary a classifier run prints."""

from __future__ import annotations

import argparse
import copy
import json
import statistics

from ..runtime.device_choice import DEVICE_CHOICES, DEVICE_VAR, set_default_device

LATEST = "latest"


class DefaultsHelpFormatter(argparse.HelpFormatter):
    """--help shows every option's default, options without help text included (argparse's
    ArgumentDefaultsHelpFormatter only annotates options that have help); help that already
    states its default, flags and --help itself are left as written."""

    def _get_help_string(self, action):
        text = action.help or ""
        if ("default" in text or action.default is argparse.SUPPRESS or action.nargs == 0
                or not action.option_strings):
            return text
        return f"{text} (default: %(default)s)".lstrip()

    def _format_action(self, action):
        # argparse formats no help line for an option without help, so give such an
        # option (a copy of it) a help text that is just its default
        if action.help is None and action.option_strings and action.nargs != 0 \
                and action.default not in (None, argparse.SUPPRESS):
            action = copy.copy(action)
            action.help = "(default: %(default)s)"
        return super()._format_action(action)


class DeviceAction(argparse.Action):
    """--device NAME: what device="auto" means from here on (set when parsed, so every
    compile of the run, trainers' and evaluators' alike, follows it)."""

    def __call__(self, parser, namespace, value, option_string=None):
        set_default_device(value)
        setattr(namespace, self.dest, value)


def add_device_arg(parser):
    """Add --device cpu|cuda|auto to `parser` (default: $NNTILE_SPMD_DEVICE, else auto)."""
    parser.add_argument("--device", choices=DEVICE_CHOICES, default=None, action=DeviceAction,
                        help=f"where the tiles live (default: ${DEVICE_VAR}, else auto: cuda "
                             "where a GPU runs a test kernel; the choice is printed)")
    return parser


def add_checkpoint_args(parser):
    """Add --checkpoint-dir, --checkpoint-every, --keep-last and --resume to `parser`."""
    group = parser.add_argument_group("checkpoints")
    group.add_argument("--checkpoint-dir", default=None, metavar="DIR",
                       help="root of the periodic checkpoints (DIR/step-NNNNNNNN)")
    group.add_argument("--checkpoint-every", type=int, default=0, metavar="N",
                       help="save a checkpoint every N optimizer steps (0: never)")
    group.add_argument("--keep-last", type=int, default=None, metavar="K",
                       help="keep only the K newest checkpoints")
    group.add_argument("--resume", nargs="?", const=LATEST, default=None, metavar="PATH",
                       help="resume from PATH, or without PATH from the latest complete "
                            "checkpoint in --checkpoint-dir (a fresh start if none)")
    return parser


def checkpoint_options(args) -> dict:
    """Trainer keyword arguments from parsed options (absent options: no checkpoints,
    so a namespace built without add_checkpoint_args works too)."""
    return {"checkpoint_dir": getattr(args, "checkpoint_dir", None),
            "checkpoint_every": getattr(args, "checkpoint_every", 0),
            "keep_last": getattr(args, "keep_last", None)}


def resume_path(args):
    """The PATH given to --resume, None for the latest, or False when not resuming."""
    resume = getattr(args, "resume", None)
    if resume is None:
        return False
    return None if resume == LATEST else resume


# -- the run summary the classifier examples print (train_mlp.py, train_cnn.py) ----------
def bytes_per_step(trainer) -> int:
    """Planned bytes all ranks send in one optimizer step (k micro-batches + update)."""
    cg, k = trainer.cg, trainer.model.accumulation
    if k == 1:
        return cg.estimate_communication()
    return k * cg.estimate_communication(phases=("forward", "backward")) + \
        cg.estimate_communication(phases="optimizer")


def peak_bytes(trainer, rank) -> int:
    """Planned peak bytes of `rank` over the executes of one optimizer step."""
    cg = trainer.cg
    if trainer.model.accumulation == 1:
        return cg.memory_on_rank(rank)
    return max(cg.memory_on_rank(rank, phases=("forward", "backward")),
               cg.memory_on_rank(rank, phases="optimizer"))


def run_summary(trainer, strategy, losses, result, **extra) -> dict:
    """The JSON summary of a finished classifier run (planned bytes, median step time)."""
    cg = trainer.cg
    times = [entry["step_time_ms"] for entry in trainer.history[1:]] or [0.0]
    return {"strategy": strategy, "ranks": cg.world.size,
            "final_loss": losses[-1], "test_accuracy": result["accuracy"],
            "step_time_ms": statistics.median(times),
            "peak_bytes_per_rank": [peak_bytes(trainer, r) for r in range(cg.world.size)],
            "bytes_sent_per_step": bytes_per_step(trainer),
            "first_loss": losses[0], "test_loss": result["loss"], **extra,
            "rank": trainer.rank}


def report(args, summary) -> None:
    """Rank 0 prints a line and the JSON summary; every rank exits non-zero below
    --target accuracy."""
    if summary.pop("rank") == 0:
        print(f"{args.strategy} on {summary['ranks']} rank(s): loss {summary['first_loss']:.4f}"
              f" -> {summary['final_loss']:.4f} in {args.steps} steps, test accuracy "
              f"{summary['test_accuracy']:.4f}, {summary['step_time_ms']:.2f} ms/step")
        print(json.dumps(summary), flush=True)
    if summary["test_accuracy"] < args.target:
        raise SystemExit(f"FAILED: test accuracy {summary['test_accuracy']:.4f} is below the "
                         f"target {args.target} ({args.strategy}, {summary['ranks']} ranks)")
