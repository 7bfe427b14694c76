"""Train layer: the command-line options of checkpointing, shared by the examples."""

from __future__ import annotations

LATEST = "latest"


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
