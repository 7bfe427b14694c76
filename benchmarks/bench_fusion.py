"""Train-step time with and without fusion, beside PyTorch eager, in one run.

MLP 784-1024-1024-10 (batch 256, GELU, cross-entropy, AdamW) and GPT-2 (bench_gpt2's
shapes: vocab 256, 6 layers, n_embd 384, 6 heads, batch 8, seq 256, AdamW), fp32,
one rank, --threads BLAS/numba threads (torch.set_num_threads the same). After a
warm-up step each, the variants run in turn, --steps times, so a busy neighbour
slows all alike. The table shows the best and median wall-clock ms/step and the
best CPU ms/step (time.process_time: on a shared, oversubscribed machine a
single-threaded step's CPU time excludes the time other processes held the core),
each with its ratio to PyTorch (< 1: ours is faster). On a checkout without
compile(fuse=...) only the unfused variant runs (for before/after comparisons).

    OMP_NUM_THREADS=1 PYTHONPATH=. python benchmarks/bench_fusion.py --threads 1
    OMP_NUM_THREADS=1 PYTHONPATH=. python benchmarks/bench_fusion.py --models mlp --steps 20
"""

from __future__ import annotations

import argparse
import inspect
import shlex
import statistics
import time

import numpy as np

import nntile_spmd as nt
from nntile_spmd.models.mlp import build_mlp
from nntile_spmd.train import add_optimizer

from _common import CpuLoad

MLP_SIZES, MLP_BATCH = (784, 1024, 1024, 10), 256


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", nargs="+", default=["mlp", "gpt2"])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--steps", type=int, default=5, help="timed steps of each variant")
    parser.add_argument("--gpt2-args", default="",
                        help='bench_gpt2 shape options, e.g. "--n-layer 2 --n-embd 64 --seq 64"')
    parser.add_argument("--tile-mib", type=float, default=None,
                        help="TilingStrategy.auto target in MiB (default: compile's default)")
    return parser.parse_args(argv)


def compile_options(fuse, threads, tile_mib=None):
    options = {"threads": threads}
    if tile_mib is not None:
        options["tiling"] = nt.TilingStrategy.auto(int(tile_mib * (1 << 20)))
    if "fuse" in inspect.signature(nt.compile).parameters:
        options["fuse"] = fuse
    elif fuse:
        return None          # this checkout has no fusion
    return options


def mlp_variants(threads, tile_mib=None, gpt2_args=""):
    """{label: step function} for ours (fused, unfused) and torch on the MLP."""
    import torch
    rng = np.random.default_rng(0)
    x = np.asfortranarray(rng.standard_normal((MLP_SIZES[0], MLP_BATCH), dtype=np.float32))
    y = rng.integers(0, MLP_SIZES[-1], MLP_BATCH)
    variants = {}
    for fuse in (False, True):
        options = compile_options(fuse, threads, tile_mib)
        if options is None:
            continue
        model = build_mlp(MLP_SIZES, MLP_BATCH, "fp32", "gelu")
        add_optimizer(model.graph, model.params, model.grads, "adamw", lr=1e-3,
                      weight_decay=0.01)
        cg = nt.compile(model.graph, **options)
        for name, value in model.init_params(np.random.default_rng(1)).items():
            cg.bind_data(name, value)

        def ours(cg=cg):
            cg.bind_data("x", x)
            cg.bind_data("y", y)
            cg.execute()
            return float(cg.get_output("loss"))
        variants["ours, fused" if fuse else "ours"] = ours
    layers = []
    for fan_in, fan_out in zip(MLP_SIZES[:-1], MLP_SIZES[1:]):
        layers += [torch.nn.Linear(fan_in, fan_out), torch.nn.GELU()]
    net = torch.nn.Sequential(*layers[:-1])
    optimizer = torch.optim.AdamW(net.parameters(), lr=1e-3, weight_decay=0.01)
    tx, ty = torch.from_numpy(np.ascontiguousarray(x.T)), torch.from_numpy(y)

    def theirs():
        optimizer.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(net(tx), ty)
        loss.backward()
        optimizer.step()
        return loss.item()
    variants["pytorch"] = theirs
    return variants


def gpt2_variants(threads, tile_mib=None, gpt2_args=""):
    """{label: step function} for ours (fused, unfused) and transformers' GPT-2."""
    import bench_gpt2
    args = bench_gpt2.parse_args(shlex.split(gpt2_args))
    hf = bench_gpt2.make_hf(args)
    ids = np.random.default_rng(0).integers(0, args.vocab, (args.batch, args.seq))
    variants = {}
    for fuse in (False, True):
        options = compile_options(fuse, threads, tile_mib)
        if options is None:
            continue
        config = bench_gpt2.gpt2.GPT2Config(vocab_size=args.vocab, n_positions=args.seq,
                                            n_embd=args.n_embd, n_layer=args.n_layer,
                                            n_head=args.n_head)
        model = bench_gpt2.gpt2.build_gpt2(config, batch=args.batch, seq=args.seq)
        add_optimizer(model.graph, model.params, model.grads, "adamw", lr=args.lr,
                      weight_decay=0.01)
        cg = nt.compile(model.graph, **options)
        model.load_hf_state_dict(cg, hf[0].state_dict())
        variants["ours, fused" if fuse else "ours"] = (
            lambda cg=cg: bench_gpt2.our_step(cg, ids)[1])
    variants["transformers"] = lambda: bench_gpt2.hf_step(hf, ids)[1]
    return variants


def time_variants(variants, steps):
    """{label: ([wall seconds], [CPU seconds]) per step}, interleaved after a warm-up each."""
    for step in variants.values():
        step()
    times = {label: ([], []) for label in variants}
    for _ in range(steps):
        for label, step in variants.items():
            wall, cpu = time.perf_counter(), time.process_time()
            step()
            times[label][1].append(time.process_time() - cpu)
            times[label][0].append(time.perf_counter() - wall)
    return times


def main(argv=None):
    args = parse_args(argv)
    import torch
    torch.set_num_threads(args.threads)
    builders = {"mlp": mlp_variants, "gpt2": gpt2_variants}
    for name in args.models:
        with CpuLoad() as load:
            variants = builders[name](args.threads, args.tile_mib, args.gpt2_args)
            times = time_variants(variants, args.steps)
        wall_ref, cpu_ref = (min(series) for series in times[list(times)[-1]])
        print(f"{name}: fp32, {args.threads} thread(s), {args.steps} timed steps each; "
              f"other processes used {load.others():.0%} of all cores")
        print(f"  {'':14s} {'best ms':>9s} {'median ms':>10s} {'/ torch':>8s} "
              f"{'best CPU ms':>12s} {'/ torch':>8s}")
        for label, (wall, cpu) in times.items():
            print(f"  {label:14s} {min(wall) * 1e3:9.1f} {statistics.median(wall) * 1e3:10.1f} "
                  f"{min(wall) / wall_ref:8.2f} {min(cpu) * 1e3:12.1f} {min(cpu) / cpu_ref:8.2f}")


if __name__ == "__main__":
    main()
