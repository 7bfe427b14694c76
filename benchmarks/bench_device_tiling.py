"""Default tiling for a GPU vs for a CPU: tasks per rank, planned peak memory and the
simulator's step on the H100 profile, GPT-2 124M shape (no GPU needed: PlanningWorld).

GPT-2 (V 50257, 12 x 768, 12 heads), batch 4, seq 512, fp32, AdamW, planned as one rank
of `--ranks` under each distribution with `device="cuda"` (tiles as large as the
distribution allows, plan/tile_budget.py) and `device="cpu"` (1 MiB tiles, grown until
a rank has at most 16,384 tasks). The simulated step prices every task by the h100
profile's roofline (launch + the longer of FLOPs at peak and bytes at the bandwidth),
single only (the replay runs every rank's program).

    PYTHONPATH=. python benchmarks/bench_device_tiling.py
    PYTHONPATH=. python benchmarks/bench_device_tiling.py --ranks 4 --distributions ddp fsdp
"""

from __future__ import annotations

import argparse
import time

import nntile_spmd as nt
from nntile_spmd.models import gpt2
from nntile_spmd.plan.instructions import Exec
from nntile_spmd.simulate import MachineModel, predict
from nntile_spmd.train import add_optimizer


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ranks", type=int, default=1)
    parser.add_argument("--distributions", nargs="+", default=["single"])
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--seq", type=int, default=512)
    parser.add_argument("--n-layer", type=int, default=12)
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    config = gpt2.GPT2Config(vocab_size=50257, n_positions=1024, n_embd=768,
                             n_layer=args.n_layer, n_head=12)
    model = gpt2.build_gpt2(config, batch=args.batch, seq=args.seq, dtype="fp32")
    add_optimizer(model.graph, model.params, model.grads, "adamw", lr=1e-4)
    h100 = MachineModel.for_device("h100")
    print(f"{'distribution':>12} {'device':>6} {'tasks/rank':>10} {'plan s':>7} "
          f"{'peak GiB':>8} {'h100 step ms':>12}  tiling")
    for distribution in args.distributions:
        for device in ("cuda", "cpu"):
            start = time.perf_counter()
            cg = nt.compile(model.graph, comm=nt.PlanningWorld(args.ranks, 0),
                            distribution=distribution, device=device)
            program = cg.plan.program(0)
            seconds = time.perf_counter() - start
            tasks = sum(type(instruction) is Exec for instruction in program)
            step = "-"
            if args.ranks == 1:
                step = f"{predict(cg.plan, h100).step_s * 1e3:.1f}"
            print(f"{distribution:>12} {device:>6} {tasks:>10} {seconds:>7.1f} "
                  f"{cg.memory_on_rank(0) / 2**30:>8.2f} {step:>12}  "
                  f"{cg.plan.tiling_notes[0][:60]}")


if __name__ == "__main__":
    main()
