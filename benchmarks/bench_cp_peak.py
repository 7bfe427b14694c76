"""Context parallelism at long sequences, planned only: peak memory and bytes sent per
rank of GPT-2 (small's width, 12 heads of 64, vocabulary 50257) on a sequence of
8,192 positions, one sequence, fp32, forward + loss + gradients: one rank ("single")
against four ranks splitting the sequence, in contiguous blocks ({"cp": 4}) and in
zigzag pairs ({"cp": 4, "cp_layout": "zigzag"}: rank r holds blocks r and 7 - r of 8,
which balances causal attention's work), with and without activation recomputation
(recompute=True: every block's activations are recomputed in backward).

Each configuration is planned with `nt.compile(g, comm=nt.PlanningWorld(n, r), ...)`:
rank r's program alone, nothing executed, so no machine needs the memory. The tiling
is the same for every configuration: the sequence in tiles of --seq-tile positions,
the vocabulary in 4096-wide tiles, the other axes by auto tiling for --tile-mib MiB,
so only the distribution differs. Printed per configuration and rank: the planned
peak (persistent + transient), the persistent bytes, bytes sent per step, the K/V
bytes the attention of all layers sends (forward K and V, backward partial dK and dV;
the formula is in docs/context_parallel.md), the planned FLOPs and the CPU seconds
planning took.

Command (from the repository root):

    PYTHONPATH=. python benchmarks/bench_cp_peak.py
    PYTHONPATH=. python benchmarks/bench_cp_peak.py --layers 2 --seq 2048
"""

from __future__ import annotations

import argparse
import time

import nntile_spmd as nt
from nntile_spmd.models import gpt2
from nntile_spmd.plan.instructions import Send

GIB = 2 ** 30


def model_of(layers, seq, recompute):
    cfg = gpt2.GPT2Config(vocab_size=50257, n_positions=seq, n_embd=768, n_layer=layers,
                          n_head=12)
    return gpt2.build_gpt2(cfg, batch=1, seq=seq, dtype="fp32", recompute=recompute)


def key_value_bytes(program, layers) -> int:
    names = {f"h{layer}_{part}" for layer in range(layers) for part in
             ("k", "v", "k_recompute", "v_recompute", "k_grad", "v_grad")}
    return sum(i.nbytes for i in program if type(i) is Send and i.key[0].split("~")[0] in names)


def plan_rank(model, distribution, ranks, rank, tiling):
    start = time.process_time()
    cg = nt.compile(model.graph, comm=nt.PlanningWorld(ranks, rank), distribution=distribution,
                    tiling=tiling)
    seconds = time.process_time() - start
    program = cg.plan.program(rank)
    return {"peak": cg.memory_on_rank(rank), "persistent": cg.plan.persistent_bytes(rank),
            "sent": cg.estimate_communication(rank),
            "kv": key_value_bytes(program, model.config.n_layer), "s": seconds,
            "flops": cg.estimate_flops(rank)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--seq", type=int, default=8192)
    parser.add_argument("--seq-tile", type=int, default=1024)
    parser.add_argument("--tile-mib", type=int, default=16)
    parser.add_argument("--cp", type=int, default=4)
    args = parser.parse_args()
    tiling = nt.TilingStrategy.constrained(
        {"input_ids": [args.seq_tile, 1], "wte": [768, 4096]},
        target_tile_bytes=args.tile_mib << 20)
    print(f"GPT-2 width 768, {args.layers} layers, sequence {args.seq} (tiles of "
          f"{args.seq_tile}), batch 1, fp32, {args.tile_mib} MiB tiles")
    print(f"{'distribution':>16} {'recompute':>9} {'rank':>4} {'peak GiB':>9} "
          f"{'persist GiB':>11} {'sent GiB':>9} {'K/V GiB':>8} {'TFLOP':>7} {'plan s':>7}")
    for recompute in (False, True):
        model = model_of(args.layers, args.seq, recompute)
        for name, distribution, ranks in (
                ("single", "single", 1), (f"cp {args.cp}", {"cp": args.cp}, args.cp),
                (f"cp {args.cp} zigzag", {"cp": args.cp, "cp_layout": "zigzag"}, args.cp)):
            for rank in range(ranks):
                r = plan_rank(model, distribution, ranks, rank, tiling)
                print(f"{name:>16} {str(recompute):>9} {rank:>4} {r['peak'] / GIB:>9.2f} "
                      f"{r['persistent'] / GIB:>11.2f} {r['sent'] / GIB:>9.3f} "
                      f"{r['kv'] / GIB:>8.3f} {r['flops'] / 1e12:>7.2f} {r['s']:>7.1f}",
                      flush=True)


if __name__ == "__main__":
    main()
