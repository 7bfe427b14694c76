"""GPT-2 train step with the structural causal mask vs the bool-constant mask, paired.

Three steps alternate on every batch, in one process: ours with attention_mask="causal"
(the attention blocks above the diagonal are never computed), ours with
attention_mask="tensor" (every block computed, then masked), and transformers'
GPT2LMHeadModel; so a busy neighbour slows all three alike. Same shapes, weights and
batches as bench_gpt2.py (whose helpers this uses); prints median and best wall and CPU
ms per step, each ours/transformers ratio (< 1: ours faster) and causal/tensor.

    PYTHONPATH=. python benchmarks/bench_causal_attention.py --threads 1 --steps 5
"""

from __future__ import annotations

import statistics

import numpy as np

import bench_gpt2


def main(argv=None):
    args = bench_gpt2.parse_args(argv)
    import torch
    torch.set_num_threads(args.threads)
    hf = bench_gpt2.make_hf(args)
    ours = {}
    for mask in ("causal", "tensor"):
        args.attention_mask = mask
        ours[mask] = bench_gpt2.make_ours(args, hf[0].state_dict())
    rng = np.random.default_rng(0)
    batches = [rng.integers(0, args.vocab, (args.batch, args.seq))
               for _ in range(args.warmup + args.steps)]
    results = {"causal": [], "tensor": [], "transformers": []}
    for index, ids in enumerate(batches):
        steps = {mask: bench_gpt2.our_step(cg, ids) for mask, cg in ours.items()}
        steps["transformers"] = bench_gpt2.hf_step(hf, ids)
        if index >= args.warmup:
            for label, step in steps.items():
                results[label].append(step)
    print(f"GPT-2 train step, fp32, {args.threads} thread(s), {args.n_layer} layers, n_embd "
          f"{args.n_embd}, seq {args.seq}, batch {args.batch}; {args.steps} steps each "
          f"after {args.warmup} warm-up; last losses "
          + ", ".join(f"{label} {steps[-1][1]:.6f}" for label, steps in results.items()))
    print(f"{'':14s} {'median ms':>10s} {'best ms':>9s} {'median CPU ms':>14s} "
          f"{'best CPU ms':>12s}")
    for label, steps in results.items():
        wall, cpu = [s[0] * 1e3 for s in steps], [s[2] * 1e3 for s in steps]
        print(f"{label:14s} {statistics.median(wall):10.1f} {min(wall):9.1f} "
              f"{statistics.median(cpu):14.1f} {min(cpu):12.1f}")
    for mine, other in (("causal", "transformers"), ("tensor", "transformers"),
                        ("causal", "tensor")):
        for what, index in (("wall", 0), ("CPU", 2)):
            a, b = [s[index] for s in results[mine]], [s[index] for s in results[other]]
            print(f"ratio {mine}/{other} ({what}): median "
                  f"{statistics.median(a) / statistics.median(b):.3f}, best {min(a) / min(b):.3f}")


if __name__ == "__main__":
    main()
