"""Cost of cg.check_finite (runtime/finite_check.py): every task's output tiles checked
for NaN and +Inf, on a GPT-2 training step (forward, backward, AdamW) on one rank.

Each repeat times `--steps` executes with the check off, then as many with it on
(interleaved, after a warm-up of each); prints the median ms per step of each and the
ratio, with how busy the machine was meanwhile (benchmarks/_common.py).

    PYTHONPATH=. python benchmarks/bench_finite_check.py [--embd 128 --tile-kib 256]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from _common import CpuLoad, wait_for_quiet

import nntile_spmd as nt
from nntile_spmd.models import gpt2
from nntile_spmd.train import add_optimizer


def compiled(args):
    cfg = gpt2.GPT2Config(vocab_size=512, n_positions=args.seq, n_embd=args.embd,
                          n_layer=args.layers, n_head=4)
    model = gpt2.build_gpt2(cfg, batch=args.batch, seq=args.seq)
    add_optimizer(model.graph, model.params, model.grads, kind="adamw", lr=1e-4)
    cg = nt.compile(model.graph, comm=nt.SimulatedWorld(1),
                    tiling=nt.TilingStrategy.auto(target_tile_bytes=args.tile_kib << 10))
    rng = np.random.default_rng(0)
    for name, value in model.init_params(rng).items():
        cg.bind_data(name, value)
    ids = rng.integers(0, cfg.vocab_size, (args.seq, args.batch))
    cg.bind_data("input_ids", ids)
    cg.bind_data("targets", np.roll(ids, -1, axis=0))
    return cg


def step_ms(cg, check, steps):
    cg.check_finite = check
    cg.execute()                                     # warm-up (and the checked index)
    start = time.perf_counter()
    for _ in range(steps):
        cg.execute()
    return (time.perf_counter() - start) / steps * 1e3


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--embd", type=int, default=128)
    parser.add_argument("--seq", type=int, default=64)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--tile-kib", type=int, default=256)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    cg = compiled(args)
    idle = wait_for_quiet(max_wait=30)
    off, on = [], []
    with CpuLoad() as load:
        for _ in range(args.repeats):
            off.append(step_ms(cg, False, args.steps))
            on.append(step_ms(cg, True, args.steps))
    tasks = sum(1 for i in cg.plan.program(0) if type(i).__name__ == "Exec")
    print(f"GPT-2 {args.layers} layers, n_embd {args.embd}, seq {args.seq}, batch "
          f"{args.batch}, tiles ~{args.tile_kib} KiB, {tasks} tasks a step; machine "
          f"{idle:.0%} busy before, {load.others():.0%} by others during")
    print(f"check off {statistics.median(off):.1f} ms, on {statistics.median(on):.1f} ms "
          f"a step: x{statistics.median(on) / statistics.median(off):.3f}")


if __name__ == "__main__":
    main()
