"""Capacity study: the largest GPT-2-shaped model whose planned peak per rank fits a
memory budget, per preset and mesh on 4 ranks, without and with planned offloading.

Models: GPT-2 shapes (vocab 50257, n_head = n_embd / 64), one sequence of --seq
tokens per rank, forward + loss + gradients + fp32 AdamW (16 bytes of persistent
state per parameter: weight, gradient, two moments, as in the ZeRO paper's 16 Psi).
For every width of --widths the depth is searched (the peak is close to affine in
depth: two small depths predict it, then plans at the predicted depth and its
neighbours settle it): the largest depth whose planned peak, the maximum over the
ranks of `plan.peak_bytes`, fits the budget. Planning only (build_plan on 4 ranks),
nothing runs. Columns: the largest model (layers x n_embd, parameters Psi), its
planned peak per rank, and the ZeRO formulas' largest Psi for the same budget
with activations ignored (DP: 16 Psi per rank; ZeRO-3: 16 Psi / N).

With offloading (--offload), the device budget bounds each rank's planned device
bytes and a second tier (--host-gib per rank: memory-mapped files from host memory,
host memory from a GPU) holds what is evicted: the largest model is the one whose
device plan fits (plan/offload.py) and whose offloaded bytes fit the second tier.
The NNTile paper reports a ~4x larger model than PyTorch FSDP on one node with
offloading; the last column is ours against FSDP without offloading.

--run (under mpiexec -n 4): the largest FSDP model for --budget-mib, with and
without offloading, runs two training steps; each rank's measured peak (the tile
store's buffers) is set beside its planned peak.

Commands (repository root):

    PYTHONPATH=. python benchmarks/bench_capacity.py
    PYTHONPATH=. python benchmarks/bench_capacity.py --offload
    PYTHONPATH=. python benchmarks/bench_capacity.py --presets fsdp --offload \
        --budget-gib 0.25 --host-gib 1 --seq 128 --tile-mib 4 --widths 256 384 512 768
    mpiexec -n 4 env PYTHONPATH=. python benchmarks/bench_capacity.py --run \
        --budget-mib 256 --models DxW DxW   # the two shapes the line above found
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import time

import numpy as np

import nntile_spmd as nt
from nntile_spmd.models import gpt2
from nntile_spmd.plan.offload import ExecutionPolicy, offload_slot_bytes
from nntile_spmd.train import add_optimizer

NRANKS = 4
PRESETS = {"single": "single", "ddp": "ddp", "fsdp": "fsdp", "tp": "tp",
           "dp2xtp2": {"dp": 2, "tp": 2}, "fsdp2xtp2": {"fsdp": 2, "tp": 2}}
GIB, MIB = 1 << 30, 1 << 20


def model_graph(width, depth, args):
    cfg = gpt2.GPT2Config(vocab_size=args.vocab, n_positions=args.seq, n_embd=width,
                          n_layer=depth, n_head=max(1, width // 64))
    model = gpt2.build_gpt2(cfg, batch=NRANKS, seq=args.seq, dtype="fp32")
    add_optimizer(model.graph, model.params, model.grads, "adamw", lr=1e-4,
                  weight_decay=0.01)
    return model, sum(math.prod(p.shape) for p in model.params)


def tiling(args):
    return nt.TilingStrategy.auto(target_tile_bytes=args.tile_mib * MIB)


def planned(width, depth, preset, args, budget, offload):
    """(fits, max planned peak per rank, max offloaded bytes per rank, Psi)."""
    model, psi = model_graph(width, depth, args)
    plan = nt.build_plan(model.graph, NRANKS, tiling(args), PRESETS[preset],
                         policy=ExecutionPolicy(True, budget, 1.0) if offload else None)
    try:
        peaks = [plan.peak_bytes(rank) for rank in range(NRANKS)]
    except nt.PlanError:      # a task needs more than the device budget
        return False, None, None, psi
    slots = [offload_slot_bytes(plan, rank) for rank in range(NRANKS)] if offload else [0]
    fits = max(peaks) <= budget and max(slots) <= args.host_gib * GIB
    return fits, max(peaks), max(slots), psi


def largest_depth(width, preset, args, budget, offload):
    """(depth, peak, offloaded, Psi) of the deepest model of `width` that fits, or None."""
    memo = {}

    def fits(depth):
        if depth not in memo:
            memo[depth] = planned(width, depth, preset, args, budget, offload)
        return memo[depth][0]

    if not fits(1):
        return None
    # the bytes a rank holds (device peak, plus offloaded bytes) are close to affine
    # in depth: the plans without offloading at depths 1 and 2 predict the depth
    one, two = (planned(width, d, preset, args, budget, False)[1] for d in (1, 2))
    limit = budget + (args.host_gib * GIB if offload else 0)
    depth = max(1, min(args.max_depth, int((limit - one) // max(two - one, 1)) + 1))
    while depth > 1 and not fits(depth):
        depth -= 1
    while depth < args.max_depth and fits(depth + 1):
        depth += 1
    _, peak, slots, psi = memo[depth]
    return depth, peak, slots, psi


def study(args):
    budget = int(args.budget_gib * GIB)
    print(f"capacity study: {NRANKS} ranks, budget {budget / GIB:.2f} GiB per rank"
          + (f", second tier {args.host_gib:.1f} GiB per rank" if args.offload else "")
          + f", seq {args.seq} per rank, vocab {args.vocab}, fp32 AdamW, tiles "
          f"~{args.tile_mib} MiB; widths {args.widths}")
    zero_dp, zero3 = budget / 16, NRANKS * budget / 16
    header = (f"{'preset':10s} {'offload':7s} {'largest':>12s} {'Psi':>9s} {'peak/rank':>10s} "
              f"{'offloaded':>10s} {'vs DP 16Psi':>11s} {'vs ZeRO-3':>9s} {'plan s':>7s}")
    print(header)
    results = {}
    for preset in args.presets:
        for offload in ([False, True] if args.offload else [False]):
            start = time.perf_counter()
            best = None
            for width in args.widths:
                found = largest_depth(width, preset, args, budget, offload)
                if found and (best is None or found[3] > best[4]):
                    best = (width, *found)
            elapsed = time.perf_counter() - start
            if best is None:
                print(f"{preset:10s} {str(offload):7s} nothing fits")
                continue
            width, depth, peak, slots, psi = best
            results[(preset, offload)] = psi
            print(f"{preset:10s} {str(offload):7s} {f'{depth}x{width}':>12s} "
                  f"{psi / 1e6:8.0f}M {peak / GIB:9.2f}G {(slots or 0) / GIB:9.2f}G "
                  f"{psi / zero_dp:10.2f}x {psi / zero3:8.2f}x {elapsed:7.0f}", flush=True)
    if ("fsdp", True) in results and ("fsdp", False) in results:
        print(f"FSDP with offloading / without: "
              f"{results[('fsdp', True)] / results[('fsdp', False)]:.1f}x larger "
              "(NNTile paper: ~4x vs PyTorch FSDP on one node)")


def run_steps(args):
    """mpiexec -n 4: the largest FSDP model for the budget, without and with offloading,
    two training steps each; measured vs planned peak per rank."""
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    budget = args.budget_mib * MIB
    # the shapes the study found for this budget (the search is single-process planning:
    # run it first, see the module doc); DEPTHxWIDTH without, then with offloading
    choices = [(offload, *map(int, shape.split("x")))
               for offload, shape in zip((False, True), args.models)]
    rows = []
    for offload, depth, width in choices:
        model, psi = model_graph(width, depth, args)
        cg = nt.compile(model.graph, distribution="fsdp", tiling=tiling(args),
                        memory_budget=budget if offload else None)
        rng = np.random.default_rng(0)
        for name, value in model.init_params(rng).items():
            cg.bind_data(name, value)
        ids = np.asfortranarray(rng.integers(0, args.vocab, (args.seq, NRANKS)))
        cg.bind_data("input_ids", ids)
        cg.bind_data("targets", ids)
        times = []
        for _ in range(2):
            comm.Barrier()
            start = time.perf_counter()
            cg.execute()
            times.append(time.perf_counter() - start)
        stats = cg.get_stats()
        mine = (cg.memory_on_rank(comm.rank), stats.peak_bytes, stats.bytes_evicted,
                stats.bytes_prefetched)
        loss = float(cg.get_output("loss"))
        every = comm.gather(mine)
        if comm.rank == 0:
            rows.append((offload, depth, width, psi, every, times, loss))
        del cg
    if comm.rank == 0:
        print(f"FSDP on {NRANKS} ranks, budget {args.budget_mib} MiB per rank, seq {args.seq}, "
              f"vocab {args.vocab}, tiles ~{args.tile_mib} MiB, 2 steps")
        print(f"{'offload':7s} {'model':>8s} {'Psi':>7s} {'rank':>4s} {'planned':>9s} "
              f"{'measured':>9s} {'diff':>6s} {'evicted':>9s} {'prefetched':>10s} "
              f"{'step s':>7s} {'loss':>7s}")
        for offload, depth, width, psi, every, times, loss in rows:
            for rank, (plan_peak, peak, evicted, prefetched) in enumerate(every):
                print(f"{str(offload):7s} {f'{depth}x{width}':>8s} {psi / 1e6:6.1f}M {rank:4d} "
                      f"{plan_peak / MIB:8.1f}M {peak / MIB:8.1f}M "
                      f"{100 * (peak - plan_peak) / plan_peak:5.1f}% {evicted / MIB:8.1f}M "
                      f"{prefetched / MIB:9.1f}M {times[-1]:7.1f} {loss:7.3f}")


def copy_overhead(args):
    """One rank, one model: step time without offloading and with a budget of
    --fraction of its planned peak (same run, alternating, best of --repeat)."""
    depth, width = map(int, args.models[0].split("x"))
    model, psi = model_graph(width, depth, args)
    plain = nt.compile(model.graph, tiling=tiling(args), distribution="single")
    budget = int(plain.memory_on_rank(0) * args.fraction)
    offloaded = nt.compile(model.graph, tiling=tiling(args), distribution="single",
                           memory_budget=budget)
    rng = np.random.default_rng(0)
    params = model.init_params(rng)
    ids = np.asfortranarray(rng.integers(0, args.vocab, (args.seq, NRANKS)))
    best = {}
    for cg in (plain, offloaded):
        for name, value in {**params, "input_ids": ids, "targets": ids}.items():
            cg.bind_data(name, value)
    for _ in range(args.repeat):
        for label, cg in (("plain", plain), ("offloaded", offloaded)):
            start = time.perf_counter()
            cg.execute()
            best[label] = min(best.get(label, 1e9), time.perf_counter() - start)
    stats = offloaded.get_stats()
    moved = stats.bytes_evicted + stats.bytes_prefetched
    print(f"{depth}x{width} ({psi / 1e6:.1f}M), seq {args.seq} x {NRANKS}, 1 rank: planned peak "
          f"{plain.memory_on_rank(0) / MIB:.0f} MiB -> {offloaded.memory_on_rank(0) / MIB:.0f} "
          f"MiB (budget {budget / MIB:.0f} MiB, measured {stats.peak_bytes / MIB:.0f} MiB); "
          f"step {best['plain']:.2f} s -> {best['offloaded']:.2f} s; moved {moved / MIB:.0f} MiB "
          f"({stats.bytes_evicted / MIB:.0f} out, {stats.bytes_prefetched / MIB:.0f} in), "
          f"{moved / MIB / max(best['offloaded'] - best['plain'], 1e-9):.0f} MiB/s of extra time")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    parser.add_argument("--budget-gib", type=float, default=memory / NRANKS / GIB,
                        help="memory per rank (default: this machine's / 4)")
    parser.add_argument("--host-gib", type=float,
                        default=shutil.disk_usage("/tmp").free / NRANKS / GIB,
                        help="second tier per rank with --offload (default: free disk / 4)")
    parser.add_argument("--budget-mib", type=int, default=256, help="budget per rank, --run")
    parser.add_argument("--offload", action="store_true", help="also with offloading")
    parser.add_argument("--run", action="store_true", help="run 2 FSDP steps (mpiexec -n 4)")
    parser.add_argument("--presets", nargs="+", default=list(PRESETS), choices=list(PRESETS))
    parser.add_argument("--widths", type=int, nargs="+", default=None)
    parser.add_argument("--seq", type=int, default=None)
    parser.add_argument("--vocab", type=int, default=50257)
    parser.add_argument("--tile-mib", type=int, default=None)
    parser.add_argument("--max-depth", type=int, default=128)
    parser.add_argument("--overhead", action="store_true",
                        help="1 rank: step time with/without offloading (--models' first)")
    parser.add_argument("--fraction", type=float, default=0.5)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--models", nargs=2, default=["6x512", "20x512"],
                        metavar="DEPTHxWIDTH", help="--run: without, with offloading")
    args = parser.parse_args()
    if args.run or args.overhead:
        args.seq, args.tile_mib = args.seq or 128, args.tile_mib or 4
        run_steps(args) if args.run else copy_overhead(args)
    else:
        args.widths = args.widths or [768, 1024, 1600, 2048, 2560]
        args.seq, args.tile_mib = args.seq or 1024, args.tile_mib or 16
        study(args)


if __name__ == "__main__":
    main()
