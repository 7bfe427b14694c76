"""Per-rank planning at scale: rank 0 of a GPT-2-XL-shaped FSDP job of 64..1,024 ranks.

GPT-2 XL's shape (48 layers, n_embd 1600, 25 heads, seq 1024, vocab 50257), one
sequence per rank (batch = ranks), forward + loss + gradients, fp32, FSDP. Tiling:
a sequence is one tile along seq, the vocabulary is cut into 4096-wide tiles,
every other axis is chosen by auto tiling for --tile-mib MiB; so the tiles, and
each rank's share of the work, are the same at every world size (plain auto
tiling shrinks tiles as the batch grows with the world). For each world size the
script builds the graph (timed apart), then
`nt.compile(g, comm=nt.PlanningWorld(n, 0), ...)`: tiling, owners and rank 0's
program alone. Times are CPU seconds of this process
(time.process_time: planning is single-threaded Python, and on a shared machine
wall time would count the neighbours too); "others" is the share of all cores
other processes used meanwhile. The goal: 1,024 ranks in under a
minute and in at most 2x the 64-rank time.

Per-rank memory and traffic must not grow with the world either: each
world also plans ranks 1, 16, N/2 and N-1 alone (--also-ranks), and a second table gives
every planned rank's peak and bytes sent, the worst of them, and ZeRO-3's figures
beside them: 16 Psi / N bytes of model state (fp32 parameters, gradients and
AdamW's two moments; this graph has no optimizer, so its own state is 8 Psi / N)
and 12 Psi (N - 1) / N bytes sent per step (two all-gathers and a reduce-scatter
of fp32 parameters; this plan gathers once per step, so 8 Psi (N - 1) / N).

Command (from the repository root):

    PYTHONPATH=. python benchmarks/bench_plan_rank.py
    PYTHONPATH=. python benchmarks/bench_plan_rank.py --layers 4 --ranks 16 64 256
    PYTHONPATH=. python benchmarks/bench_plan_rank.py --layers 4 --ranks 64 1024 --also-ranks
    PYTHONPATH=. python benchmarks/bench_plan_rank.py --layers 4 --ranks 64 1024 --default-tiling

--mesh fsdpxtp / dpxtp plans the mesh {"fsdp" or "dp": N/t, "tp": t} (--tp, default 8:
Megatron's tensor parallelism within a node) with one sequence per row of the mesh
(batch N/t), and sets each rank's bytes sent beside Megatron's: per step 2(t-1)/t of
the activations it all-reduces along tp ((4 layers + 2) x seq x n_embd x 4 bytes per
sequence) plus, along the batch axis, 3(f-1)/f (fsdp) or 2(d-1)/d (dp) of the
parameter bytes of its tp column (4 Psi / t); ZeRO-3's 16 Psi / N (dp: 16 Psi / t)
of model state beside the peak.

    PYTHONPATH=. python benchmarks/bench_plan_rank.py --layers 4 --ranks 64 1024 \
        --default-tiling --mesh fsdpxtp --also-ranks

--max-seconds skips the larger worlds once one world took longer (so a run that
cannot meet the goal says so without running for an hour).
"""

from __future__ import annotations

import argparse
import time
from collections import Counter

from _common import CpuLoad, wait_for_quiet

import nntile_spmd as nt
from nntile_spmd.models import gpt2


def gpt2_xl_model(layers, ranks):
    cfg = gpt2.GPT2Config(vocab_size=50257, n_positions=1024, n_embd=1600, n_layer=layers,
                          n_head=25)
    return gpt2.build_gpt2(cfg, batch=ranks, seq=1024, dtype="fp32")


def fixed_tiling(tile_mib):
    return nt.TilingStrategy.constrained(
        {"input_ids": [1024, 1], "wte": [1600, 4096]},
        target_tile_bytes=tile_mib << 20)


MESHES = {"fsdp": None, "fsdpxtp": "fsdp", "dpxtp": "dp"}   # --mesh -> batch axis


def distribution_for(mesh, ranks, tp):
    """(distribution, sequences): fsdp one sequence per rank; a mesh one per row."""
    if MESHES[mesh] is None:
        return "fsdp", ranks
    return {MESHES[mesh]: ranks // tp, "tp": tp}, ranks // tp


def measure(layers, ranks, tile_mib, rank=0, mesh="fsdp", tp=8):
    """{graph_s, plan_s, instructions by kind, peak, sent, others, psi} for `rank`;
    tile_mib None: the default tiling (auto, sized by tasks per rank)."""
    return measure_with(layers, ranks, None if tile_mib is None else fixed_tiling(tile_mib),
                        rank, *distribution_for(mesh, ranks, tp))


def measure_with(layers, ranks, tiling, rank, distribution="fsdp", sequences=None):
    start = time.process_time()
    model = gpt2_xl_model(layers, sequences or ranks)
    graph = model.graph
    graph_s = time.process_time() - start
    with CpuLoad() as load:
        start = time.process_time()
        cg = nt.compile(graph, comm=nt.PlanningWorld(ranks, rank), distribution=distribution,
                        tiling=tiling)
        plan_s = time.process_time() - start
    program = cg.plan.program(rank)
    return {"graph_s": graph_s, "plan_s": plan_s, "ops": len(graph.ops()),
            "kinds": Counter(type(i).__name__ for i in program), "total": len(program),
            "peak": cg.memory_on_rank(rank), "sent": cg.estimate_communication(rank),
            "others": load.others(), "psi": sum(p.size for p in model.params)}


def formulas(psi, ranks, mesh, tp, layers):
    """(model state, bytes sent) per rank and step by ZeRO-3 (fsdp) or Megatron with
    fsdp / dp across its tp columns (module docstring)."""
    if MESHES[mesh] is None:
        return 16 * psi / ranks, 12 * psi * (ranks - 1) / ranks
    rows = ranks // tp
    activations = (4 * layers + 2) * 1024 * 1600 * 4
    batch_factor = 3 * (rows - 1) / rows if mesh == "fsdpxtp" else 2 * (rows - 1) / rows
    state = 16 * psi / ranks if mesh == "fsdpxtp" else 16 * psi / tp
    return state, 2 * (tp - 1) / tp * activations + batch_factor * 4 * psi / tp


def print_scale_out(per_rank, mesh="fsdp", tp=8, layers=48):
    """Each world's planned ranks, the worst of them, and ZeRO-3's / Megatron's figures."""
    print(f"\n{'ranks':>6} {'rank':>6} {'peak GiB':>9} {'sent GiB':>9} "
          f"{'state GiB':>10} {'formula sent GiB':>17}")
    for ranks, results in per_rank.items():
        psi = next(iter(results.values()))["psi"]
        state, sent = (v / 2**30 for v in formulas(psi, ranks, mesh, tp, layers))
        for rank, result in results.items():
            print(f"{ranks:>6} {rank:>6} {result['peak'] / 2**30:>9.2f} "
                  f"{result['sent'] / 2**30:>9.2f} {state:>10.3f} {sent:>17.2f}")
        worst_peak = max(result["peak"] for result in results.values())
        worst_sent = max(result["sent"] for result in results.values())
        print(f"{ranks:>6} {'worst':>6} {worst_peak / 2**30:>9.2f} {worst_sent / 2**30:>9.2f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=48)
    parser.add_argument("--ranks", type=int, nargs="+", default=[64, 256, 1024])
    parser.add_argument("--tile-mib", type=int, default=64)
    parser.add_argument("--default-tiling", action="store_true",
                        help="no tiling argument: auto, sized by tasks per rank")
    parser.add_argument("--max-seconds", type=float, default=600.0)
    parser.add_argument("--mesh", choices=sorted(MESHES), default="fsdp",
                        help="fsdp (one sequence per rank) or a mesh with a tp axis")
    parser.add_argument("--tp", type=int, default=8, help="the tp axis of --mesh")
    parser.add_argument("--also-ranks", action="store_true",
                        help="also plan ranks 1, 16 (owners of weight tiles), N/2 and N-1 "
                             "alone; print the worst rank")
    args = parser.parse_args()
    wait_for_quiet()
    tile_mib = None if args.default_tiling else args.tile_mib
    tiles = "default tiling" if tile_mib is None else f"{tile_mib} MiB tiles"
    print(f"GPT-2-XL shape, {args.layers} layers, {args.mesh}"
          f"{f' (tp {args.tp})' if args.mesh != 'fsdp' else ''}, {tiles}, rank 0")
    print(f"{'ranks':>6} {'ops':>6} {'graph s':>8} {'plan s':>8} {'instr':>8} {'EXEC':>7} "
          f"{'SEND':>6} {'RECV':>6} {'FREE':>7} {'peak GiB':>9} {'sent GiB':>9} {'others':>7}")
    results, per_rank = {}, {}
    for ranks in args.ranks:
        mesh = (args.mesh, args.tp)
        result = results[ranks] = measure(args.layers, ranks, tile_mib, 0, *mesh)
        per_rank[ranks] = {0: result}
        if args.also_ranks:
            for rank in sorted({1, 16, ranks // 2, ranks - 1} - {0}):
                per_rank[ranks][rank] = measure(args.layers, ranks, tile_mib, rank, *mesh)
        kinds = result["kinds"]
        print(f"{ranks:>6} {result['ops']:>6} {result['graph_s']:>8.2f} "
              f"{result['plan_s']:>8.2f} {result['total']:>8} {kinds['Exec']:>7} "
              f"{kinds['Send']:>6} {kinds['Recv']:>6} {kinds['Free']:>7} "
              f"{result['peak'] / 2**30:>9.2f} {result['sent'] / 2**30:>9.2f} "
              f"{result['others']:>6.0%}", flush=True)
        if result["plan_s"] > args.max_seconds:
            print(f"stopped: {ranks} ranks took more than --max-seconds {args.max_seconds}")
            break
    print_scale_out(per_rank, args.mesh, args.tp, args.layers)
    first, last = min(results), max(results)
    if last != first:
        ratio = results[last]["plan_s"] / results[first]["plan_s"]
        print(f"plan time ratio {last}/{first} ranks: {ratio:.2f} (goal <= 2; and "
              f"{results[last]['plan_s']:.1f} s for {last} ranks, goal < 60 s)")


if __name__ == "__main__":
    main()
