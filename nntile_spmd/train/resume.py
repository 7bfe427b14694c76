"""Train layer: checkpoints every N steps under one root, keep the last K, resume
from the latest complete one. No mpi4py: collectives go through cg.world.

Layout: <root>/step-00000040/ is one checkpoint (train.checkpoint); it is complete
once its manifest, written last, exists and verifies, so a run killed mid-save
resumes from the checkpoint before. A complete checkpoint whose tiles then fail
verification (a flipped bit in a shard) is skipped with a warning, and the run
resumes from the one before it (Trainer.resume).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from .checkpoint import CheckpointError, read_manifest

STEP_DIR = re.compile(r"^step-(\d{8})$")


def step_directory(root, step: int) -> Path:
    return Path(root) / f"step-{int(step):08d}"


def complete_checkpoints(root) -> list:
    """[(step, path)] of the verified checkpoints under `root`, oldest first."""
    root, found = Path(root), []
    if not root.is_dir():
        return found
    for path in root.iterdir():
        match = STEP_DIR.match(path.name)
        if match and path.is_dir():
            try:
                read_manifest(path, step=int(match.group(1)))
            except CheckpointError:
                continue            # interrupted or damaged: never resumed from
            found.append((int(match.group(1)), path))
    return sorted(found)


def latest_checkpoint(root):
    """The newest complete checkpoint under `root`, or None."""
    complete = complete_checkpoints(root)
    return complete[-1][1] if complete else None


def prune(root, keep_last: int):
    """Delete all but the `keep_last` newest complete checkpoints, and the incomplete
    ones older than the newest complete one (a save in progress is newer: kept)."""
    complete = complete_checkpoints(root)
    if not complete:
        return
    keep = {path for _, path in complete[-keep_last:]}
    newest = complete[-1][0]
    for path in Path(root).iterdir():
        match = STEP_DIR.match(path.name)
        if match and path not in keep and int(match.group(1)) <= newest:
            shutil.rmtree(path, ignore_errors=True)


class CheckpointPolicy:
    """When the trainer saves (every `every` steps into `root`) and how many it keeps."""

    def __init__(self, root=None, every: int = 0, keep_last=None):
        if every and root is None:
            raise ValueError("checkpoint_every needs a checkpoint_dir")
        if every < 0 or (keep_last is not None and keep_last < 1):
            raise ValueError(f"need checkpoint_every >= 0 and keep_last >= 1, got {every} "
                             f"and {keep_last}")
        self.root, self.every, self.keep_last = root, every, keep_last

    def after_step(self, trainer):
        """Save if this step is due; then prune (rank 0, after every rank finished)."""
        if not self.every or trainer.step % self.every:
            return
        trainer.save(step_directory(self.root, trainer.step))
        if self.keep_last and trainer.rank == 0:
            prune(self.root, self.keep_last)

    def find(self, world, path=None):
        """The checkpoint to resume from: `path`, else the latest under root (or None);
        every rank must find the same one (collective)."""
        candidates = self.candidates(world, path)
        return candidates[0] if candidates else None

    def candidates(self, world, path=None) -> list:
        """The checkpoints to try, newest first: [`path`], or every complete one under
        root; every rank must find the same ones (collective)."""
        if path is None and self.root is None:
            raise ValueError("resume: pass a checkpoint path or set checkpoint_dir")
        found = [Path(path)] if path is not None else \
            [found for _, found in reversed(complete_checkpoints(self.root))]
        choices = world.agree([str(found_path) for found_path in found], "resume: the checkpoints")
        if any(theirs != choices[0] for theirs in choices):
            raise CheckpointError(f"resume: the ranks found different checkpoints {choices} "
                                  "(is the directory on a file system they all share?)")
        return found
