"""execute_async vs execute with a data loader: time per step of the seed API's
ExecutableGraph when the next batch is loaded while the step runs.

The graph is the NNTile 2.0 plan's attention layer (tests/graph/seed_examples.py's
shape, larger: --seq x --batch x --embed, fp32, one process). The loader stands for
an I/O-bound one: it sleeps --loader-share of the measured compute time of a step, then
draws the batch. "execute": load, bind, execute, in turn. "execute_async": start the
step, load and bind the next batch while it runs (bind_input stages it), wait. Median
of --steps steps after one warm-up over two alternated rounds; the outputs of the two
loops are compared bitwise.

    python benchmarks/bench_seed_async.py [--seq 256 --batch 8 --embed 256 --steps 8
                                           --loader-share 0.3]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import nntile_spmd as nt


def build(args):
    g = nt.LogicalGraph("layer")
    x = g.input(nt.TensorSpec([args.seq, args.batch, args.embed]), "input")
    weights = [g.parameter(nt.TensorSpec([args.embed, args.embed]), f"w{i}") for i in range(4)]
    q, k, v = (g.matmul(x, w) for w in weights[:3])
    g.output(g.add(g.matmul(g.scaled_dot_product_attention(q, k, v), weights[3]), x), "output")
    physical = nt.PhysicalGraph(g, comm=nt.SimulatedWorld(1), device="cpu")
    physical.set_tiling(nt.TilingStrategy.auto_tiling(target_tile_bytes=1 << 20))
    exe = nt.ExecutableGraph(physical)
    exe.init_parameters("xavier_uniform")
    return exe


def loader(args, delay):
    def load(step):
        time.sleep(delay)
        rng = np.random.default_rng(step)
        return rng.standard_normal((args.seq, args.batch, args.embed), dtype=np.float32)
    return load


def in_turn(exe, load, steps):
    times, outputs = [], []
    for step in range(steps + 1):
        start = time.perf_counter()
        exe.bind_input("input", load(step))
        exe.execute()
        times.append(time.perf_counter() - start)
        outputs.append(exe.get_output("output"))
    return statistics.median(times[1:]), outputs


def overlapped(exe, load, steps):
    times, outputs = [], []
    exe.bind_input("input", load(0))
    for step in range(steps + 1):
        start = time.perf_counter()
        handle = exe.execute_async()
        exe.bind_input("input", load(step + 1))   # staged: the running step keeps its batch
        handle.result()
        times.append(time.perf_counter() - start)
        outputs.append(exe.get_output("output"))
    return statistics.median(times[1:]), outputs


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seq", type=int, default=256)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--embed", type=int, default=256)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--loader-share", type=float, default=0.3)
    args = parser.parse_args()
    exe = build(args)
    compute, _ = in_turn(exe, loader(args, 0.0), 5)
    load = loader(args, args.loader_share * compute)
    rounds = [(in_turn(exe, load, args.steps), overlapped(exe, load, args.steps))
              for _ in range(2)]   # alternated: the machine's load drifts
    sync_s = statistics.median(s for (s, _), _ in rounds)
    async_s = statistics.median(a for _, (a, _) in rounds)
    (_, sync_out), (_, async_out) = rounds[0]
    same = all(np.array_equal(a, b) for a, b in zip(sync_out, async_out))
    print(f"compute {compute * 1e3:.1f} ms/step, loader {args.loader_share * compute * 1e3:.1f} "
          f"ms: execute {sync_s * 1e3:.1f} ms/step, execute_async {async_s * 1e3:.1f} ms/step "
          f"({sync_s / async_s:.2f}x); outputs bitwise equal: {same}")


if __name__ == "__main__":
    main()
