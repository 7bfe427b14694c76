"""bf16 mixed precision vs fp32: the loss curves of examples/train_gpt2.py, and memory
and traffic planned and measured.

Two trainers (examples/train_gpt2.py's make_trainer) train the same byte-level GPT-2
on the same batches from the same weights in this process, step by step in
alternation (so a busy machine slows both alike): fp32 (--precision plain) and
bf16-mixed (fp32 master weights, gradients and AdamW state; attention and MLP in bf16;
docs/precision.md). Printed: the two curves' relative difference at the last step,
its largest value over all steps, and that of the means of the last 20 steps; for
each, the median step time and per rank the planned and measured peak bytes and
bytes sent in the last step (statistics from the runtime: the tile store's
allocator, the buffers handed to the transport).

    PYTHONPATH=. python benchmarks/bench_precision.py                   # 1 rank
    PYTHONPATH=. python benchmarks/bench_precision.py --simulate 2 --strategy fsdp
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))

import gpt2_corpus as corpus  # noqa: E402
import train_gpt2  # noqa: E402

import nntile_spmd as nt  # noqa: E402


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--strategy", choices=train_gpt2.STRATEGIES, default="single")
    parser.add_argument("--simulate", type=int, default=1, metavar="N")
    parser.add_argument("--n-layer", type=int, default=2)
    parser.add_argument("--n-embd", type=int, default=64)
    parser.add_argument("--n-head", type=int, default=4)
    parser.add_argument("--seq", type=int, default=32)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--corpus-bytes", type=int, default=500_000)
    return parser.parse_args(argv)


def make(args, precision):
    example = train_gpt2.parse_args([
        "--strategy", args.strategy, "--steps", str(args.steps), "--n-layer",
        str(args.n_layer), "--n-embd", str(args.n_embd), "--n-head", str(args.n_head),
        "--seq", str(args.seq), "--batch", str(args.batch), "--precision", precision])
    return train_gpt2.make_trainer(example, nt.SimulatedWorld(args.simulate))


def summary_of(cg, ranks, milliseconds):
    return {"median_step_ms": round(statistics.median(milliseconds), 1),
            "peak_bytes_planned": [cg.memory_on_rank(r) for r in ranks],
            "peak_bytes_measured": [cg.get_stats(r).peak_bytes for r in ranks],
            "bytes_sent_planned": [cg.estimate_communication(r) for r in ranks],
            "bytes_sent_measured": [cg.get_stats(r).bytes_transferred for r in ranks]}


def main(argv=None):
    args = parse_args(argv)
    text = corpus.load_corpus(args.corpus_bytes)
    precisions = ("plain", "bf16-mixed")
    trainers = {precision: make(args, precision) for precision in precisions}
    losses = {precision: [] for precision in precisions}
    times = {precision: [] for precision in precisions}
    for step in range(args.steps):
        ids, targets = corpus.train_batch(text.train, 0, step, args.seq, args.batch)
        for precision, trainer in trainers.items():   # paired: a busy machine slows both
            start = time.perf_counter()
            losses[precision].append(trainer.train_step([{"input_ids": ids,
                                                          "targets": targets}]))
            times[precision].append((time.perf_counter() - start) * 1e3)
    a, b = np.array(losses["plain"]), np.array(losses["bf16-mixed"])
    relative = np.abs(b - a) / a
    summary = {
        "steps": args.steps, "strategy": args.strategy, "ranks": args.simulate,
        "loss_fp32": [round(a[0], 4), round(a[-1], 4)],
        "loss_bf16_mixed": [round(b[0], 4), round(b[-1], 4)],
        "final_relative_difference": round(float(relative[-1]), 5),
        "max_relative_difference": round(float(relative.max()), 5),
        "last20_mean_relative_difference": round(float(abs(b[-20:].mean() / a[-20:].mean()
                                                           - 1)), 5)}
    for precision, trainer in trainers.items():
        summary[precision] = summary_of(trainer.cg, range(args.simulate), times[precision])
        trainer.close()
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
