"""bf16 mixed precision vs fp32: the loss curves of examples/train_gpt2.py, and memory
and traffic planned and measured.

Both runs train the same byte-level GPT-2 on the same batches from the same weights
(examples/train_gpt2.py's make_trainer), one after the other in this process: fp32
(--precision plain) and bf16-mixed (fp32 master weights, gradients and AdamW state; a
bf16 forward and backward; loss in fp32). Printed: the two curves' relative difference
at the last step, its largest value over all steps, and over the mean of the last 20
steps; per rank the planned and measured peak bytes and bytes sent in the last step
(statistics from the runtime: the tile store's allocator, the buffers handed to MPI).

    PYTHONPATH=. python benchmarks/bench_precision.py                   # 1 rank
    PYTHONPATH=. python benchmarks/bench_precision.py --simulate 2 --strategy fsdp
"""

from __future__ import annotations

import argparse
import json
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


def run(args, precision, text):
    example = train_gpt2.parse_args([
        "--strategy", args.strategy, "--steps", str(args.steps), "--n-layer",
        str(args.n_layer), "--n-embd", str(args.n_embd), "--n-head", str(args.n_head),
        "--seq", str(args.seq), "--batch", str(args.batch), "--precision", precision])
    trainer = train_gpt2.make_trainer(example, nt.SimulatedWorld(args.simulate))
    start = time.perf_counter()
    losses = []
    for step in range(args.steps):
        ids, targets = corpus.train_batch(text.train, example.seed, step, args.seq, args.batch)
        losses.append(trainer.train_step([{"input_ids": ids, "targets": targets}]))
    seconds = time.perf_counter() - start
    cg = trainer.cg
    ranks = range(args.simulate)
    result = {
        "precision": precision, "seconds": round(seconds, 1), "losses": losses,
        "peak_bytes_planned": [cg.memory_on_rank(r) for r in ranks],
        "peak_bytes_measured": [cg.get_stats(r).peak_bytes for r in ranks],
        "bytes_sent_planned": [cg.estimate_communication(r) for r in ranks],
        "bytes_sent_measured": [cg.get_stats(r).bytes_transferred for r in ranks]}
    trainer.close()
    return result


def main(argv=None):
    args = parse_args(argv)
    text = corpus.load_corpus(args.corpus_bytes)
    fp32, mixed = (run(args, precision, text) for precision in ("plain", "bf16-mixed"))
    a, b = np.array(fp32["losses"]), np.array(mixed["losses"])
    relative = np.abs(b - a) / a
    summary = {
        "steps": args.steps, "strategy": args.strategy, "ranks": args.simulate,
        "loss_fp32": [round(a[0], 4), round(a[-1], 4)],
        "loss_bf16_mixed": [round(b[0], 4), round(b[-1], 4)],
        "final_relative_difference": round(float(relative[-1]), 5),
        "max_relative_difference": round(float(relative.max()), 5),
        "last20_mean_relative_difference": round(float(abs(b[-20:].mean() / a[-20:].mean()
                                                           - 1)), 5)}
    for run_result in (fp32, mixed):
        name = run_result.pop("precision")
        run_result.pop("losses")
        summary[name] = run_result
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
