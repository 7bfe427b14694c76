"""Train layer: learning-rate schedules, pure functions of the optimizer step.

A schedule is applied between executes through the optimizer's runtime scalar
(`cg.set_scalar("lr", schedule(step))`), so changing the rate never recompiles.
Imports nothing from the framework.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class CosineSchedule:
    """Linear warm-up to `lr` over `warmup` steps, then cosine decay to `min_lr` at
    step `total` (and `min_lr` after it). Steps are 0-based optimizer steps."""

    lr: float
    total: int
    warmup: int = 0
    min_lr: float = 0.0

    def __post_init__(self):
        if self.total < 1 or not 0 <= self.warmup <= self.total:
            raise ValueError(f"CosineSchedule: need total >= 1 and 0 <= warmup <= total, "
                             f"got total={self.total}, warmup={self.warmup}")
        if not 0.0 <= self.min_lr <= self.lr:
            raise ValueError(f"CosineSchedule: need 0 <= min_lr <= lr, got min_lr="
                             f"{self.min_lr}, lr={self.lr}")

    def __call__(self, step: int) -> float:
        if step < 0:
            raise ValueError(f"CosineSchedule: step must be >= 0, got {step}")
        if step < self.warmup:
            # (step + 1): the first step already trains, with lr / warmup, never with 0
            return self.lr * (step + 1) / self.warmup
        decay_steps = self.total - self.warmup
        if step >= self.total or decay_steps == 0:
            return self.min_lr if step >= self.total else self.lr
        progress = (step - self.warmup) / decay_steps
        return self.min_lr + 0.5 * (self.lr - self.min_lr) * (1.0 + math.cos(math.pi * progress))
